"""Full disk without a mount (runs everywhere, no TensorFlow): ENOSPC is recognised through the
exception chains TF, Beam and TFX wrap it in (the clean-up of what a failed save left:
tests/components/test_checkpoint_layout.py). tests/e2e/test_bad_input.py does it for real on a
tmpfs."""

import errno
import os

import pytest

from runners.local.disk_full import is_disk_full
from tests.support.mlmd import writable_store


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
    from runners.local.disk_full import named_disk_full
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


def test_a_data_stage_error_names_its_folder_through_beams_text():
    """A Beam worker's DiskFullError comes back as a RuntimeError's text, step appended."""
    from runners.local.disk_full import named_disk_full
    wrapped = RuntimeError("DiskFullError: no space left on device while writing the data "
                           "stage's shards under /h/TextExampleGen/examples/1; nothing half-written "
                           "is left there [while running 'TextToTFRecordShards/ConvertUnits']")
    named = named_disk_full(wrapped)
    assert str(named).startswith("no space left on device while writing the data stage's shards "
                                 "under /h/TextExampleGen/examples/1;")
    assert "while running" not in str(named)


def test_a_run_log_on_a_full_disk_says_so_once_and_stops(capsys):
    """/dev/full answers every write with ENOSPC: one note naming the file, no logging traceback
    per record, and closing it at the run's end raises nothing."""
    import logging
    from runners.local.logs import RunLogHandler
    handler = RunLogHandler("/dev/full", encoding="utf-8")
    logger = logging.getLogger("test_full_log")
    logger.propagate = False   # only this handler: not the console handlers of earlier runs
    logger.addHandler(handler)
    try:
        for i in range(3):
            logger.error("record %d", i)
    finally:
        logger.removeHandler(handler)
        handler.close()
    err = capsys.readouterr().err
    assert err.count("bigtrain: note: the run's log /dev/full could not be written "
                     "(No space left on device); it ends there") == 1, err
    assert "Logging error" not in err and "Traceback" not in err


def test_a_store_on_a_full_disk_says_so_on_the_console(tmp_path, capsys):
    """The run's outcome cannot be written into a sqlite store whose disk is full: the console
    says so, naming the store, and the run still ends with its own error (exit 7), no traceback."""
    from ml_metadata.proto import metadata_store_pb2 as pb
    from components.config.loading import build_config
    from runners.local import run as local
    from tests.support.disks import fill, small_disk
    home = tmp_path / "home"
    with small_disk(home, "400k"):
        config = build_config(overrides=[f"paths.home={home}"])
        store = writable_store(home / "metadata.sqlite")
        run_type = store.put_context_type(pb.ContextType(name="pipeline_run"))
        store.put_contexts([pb.Context(type_id=run_type, name="r1")])
        del store
        fill(home)
        plan = local.RunPlan("r1", str(home / "runs" / "r1"), str(home / "runs" / "r1" / "run.log"),
                             input_fingerprint="", inputs_key={}, reasons=("test",))
        error = RuntimeError("OSError: [Errno 28] No space left on device [while running 'W']")
        assert local._record_outcome(config, plan, error, None) is error
    err = capsys.readouterr().err
    assert (f"bigtrain: note: this run's outcome could not be recorded in the metadata store "
            f"{home / 'metadata.sqlite'} (database or disk is full)") in err, err


@pytest.mark.parametrize("free_pages", [0, 1])
def test_a_run_in_a_full_home_is_exit_7_and_leaves_it_as_found(tmp_path, capsys, free_pages):
    """Before any stage: 0 pages free fails the home's probe (was exit 6, the probe file left),
    1 page the run's folder (was an `unexpected OSError` traceback, exit 1, the lock file and a
    half-written config.yaml left)."""
    from components.common.errors import EXIT_DISK_FULL
    from runners.cli import app as cli
    from tests.support.disks import fill, small_disk
    home = tmp_path / "home"
    with small_disk(home, "64k"):
        filler = fill(home)
        os.truncate(filler, os.path.getsize(filler) - 4096 * free_pages)
        code = cli.main(["run", "--home", str(home), "--set", f"data.input={tmp_path}"])
        err = capsys.readouterr().err
        assert code == EXIT_DISK_FULL, err
        assert f"bigtrain: no space left on device in the home {home} (No space left on device)" in err
        assert "Traceback" not in err
        assert os.listdir(home) == ["filler"]


def test_a_lock_record_the_full_disk_refuses_leaves_no_lock(tmp_path, monkeypatch):
    """Writing the holder's record fails (ENOSPC): the lock is released and the file it created
    removed, so the next run neither waits nor finds a stale holder."""
    from runners.local import lock as lock_lib

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(lock_lib.os, "write", full)
    with pytest.raises(OSError, match="No space left"):
        lock_lib.HomeLock(str(tmp_path), {"run_id": "r1"}).acquire()
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []
    with lock_lib.HomeLock(str(tmp_path), {"run_id": "r2"}) as lock:
        assert lock.stale is None
