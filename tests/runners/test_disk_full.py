"""Full disk without a mount (runs everywhere, no TensorFlow): ENOSPC is recognised through the
exception chains TF, Beam and TFX wrap it in (the clean-up of what a failed save left:
tests/components/test_checkpoint_layout.py). tests/e2e/test_bad_input.py does it for real on a
tmpfs."""

import errno
import os

from runners.local import is_disk_full


def test_enospc_is_recognised_through_wrappers():
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/x/shard.gz")
        except OSError as inner:
            raise RuntimeError("while running 'WriteShard'") from inner
    except RuntimeError as outer:
        assert is_disk_full(outer)
    # TF's C++ errors carry only the text
    assert is_disk_full(RuntimeError("ResourceExhaustedError: /x/ckpt-2.data; No space left on device"))
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))

