"""Full disk without a mount (runs everywhere, no TensorFlow): ENOSPC is recognised through the
exception chains TF, Beam and TFX wrap it in (the clean-up of what a failed save left:
tests/components/test_checkpoint_layout.py). tests/e2e/test_bad_input.py does it for real on a
tmpfs."""

import errno
import os

from runners.disk_full import is_disk_full


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



def test_a_stages_own_disk_full_error_is_found_through_wrappers():
    """The push names the serving dir it failed in; the run keeps that message (not the home)."""
    from components.common.errors import DiskFullError
    from runners.disk_full import named_disk_full
    try:
        try:
            try:
                raise OSError(errno.ENOSPC, "No space left on device")
            except OSError as inner:
                raise DiskFullError("no space left on device while pushing m into /srv/gpt") from inner
        except DiskFullError as named:
            raise RuntimeError("Execution 9 failed") from named
    except RuntimeError as outer:
        assert is_disk_full(outer)
        assert "into /srv/gpt" in str(named_disk_full(outer))
    assert named_disk_full(OSError(errno.ENOSPC, "No space left on device")) is None
