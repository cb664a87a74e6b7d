"""Full disk without a mount (runs everywhere, no TensorFlow): ENOSPC is recognised through the
exception chains TF, Beam and TFX wrap it in, and the checkpoint clean-up removes exactly what a
failed save left (files the atomically-replaced `checkpoint` state file does not list, and save
temp folders), keeping every complete checkpoint. tests/e2e/test_bad_input.py does it for real on
a tmpfs."""

import errno
import os

from components.common.checkpoints import prune_partial_checkpoints
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


def test_prune_keeps_complete_checkpoints_only(tmp_path):
    directory = tmp_path / "abc123"
    directory.mkdir()
    (directory / "checkpoint").write_text('model_checkpoint_path: "ckpt-20"\n'
                                          'all_model_checkpoint_paths: "ckpt-10"\n'
                                          'all_model_checkpoint_paths: "ckpt-20"\n')
    complete = ["ckpt-10.index", "ckpt-10.data-00000-of-00001", "ckpt-20.index",
                "ckpt-20.data-00000-of-00001"]
    partial = ["ckpt-30.data-00000-of-00001"]  # the save that hit the full disk
    for name in complete + partial:
        (directory / name).write_bytes(b"x")
    (directory / "ckpt-30_temp").mkdir()
    (directory / "ckpt-30_temp" / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"x")
    removed = prune_partial_checkpoints(str(tmp_path))
    assert sorted(os.path.basename(p) for p in removed) == ["ckpt-30.data-00000-of-00001", "ckpt-30_temp"]
    assert sorted(os.listdir(directory)) == sorted(["checkpoint"] + complete)


def test_prune_removes_an_emptied_save_temp_folder(tmp_path):
    """A save that hit the full disk can remove its partial file and leave ckpt-N_temp/ empty
    (seen in the e2e disk-full run): the folder goes too (the old code only found temp folders
    through the files inside them)."""
    directory = tmp_path / "abc123"
    directory.mkdir()
    (directory / "checkpoint").write_text('model_checkpoint_path: "ckpt-20"\n'
                                          'all_model_checkpoint_paths: "ckpt-20"\n')
    for name in ("ckpt-20.index", "ckpt-20.data-00000-of-00001"):
        (directory / name).write_bytes(b"x")
    (directory / "ckpt-40_temp").mkdir()
    removed = prune_partial_checkpoints(str(tmp_path))
    assert [os.path.basename(p) for p in removed] == ["ckpt-40_temp"]
    assert sorted(os.listdir(directory)) == ["checkpoint", "ckpt-20.data-00000-of-00001",
                                             "ckpt-20.index"]


def test_prune_removes_a_failed_input_state_save(tmp_path):
    """The training input's state is saved after its checkpoint, one folder down
    (<key>/input-<layout>/state-N, components/training/feed.py); a save that hit the full disk
    leaves state-N_temp/ there (seen in the e2e disk-full run). It goes; complete states stay.
    Fails on the old search, which looked for temp folders only directly under <key>/."""
    directory = tmp_path / "abc123"
    inputs = directory / "input-0123456789abcdef"
    inputs.mkdir(parents=True)
    (directory / "checkpoint").write_text('model_checkpoint_path: "ckpt-20"\n'
                                          'all_model_checkpoint_paths: "ckpt-20"\n')
    complete = ["state-20.index", "state-20.data-00000-of-00001"]
    for name in complete:
        (inputs / name).write_bytes(b"x")
    (inputs / "state-40_temp").mkdir()
    removed = prune_partial_checkpoints(str(tmp_path))
    assert [os.path.relpath(p, directory) for p in removed] == [
        "input-0123456789abcdef/state-40_temp"]
    assert sorted(os.listdir(inputs)) == sorted(complete)
