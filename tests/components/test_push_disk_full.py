"""The serving dir fills during a push, for real: a tmpfs mounted (as root) as the serving dir,
so the kernel itself answers ENOSPC; where mounting is not permitted these tests skip, saying so
(tests/components/test_push_and_blessing.py covers the copy's clean-up with an injected ENOSPC).

Whether the disk fills during the copy into staging or while the deployment files (models.config,
batching_parameters) are written after the version is published: DiskFullError (exit 7) naming
the serving dir, also through the run's failure path (TFX wraps the stage's error); nothing of the
push is left (no staging folder, no version, no claim of it, no temporary file; the deployment
files as they were); the next push, with space again, succeeds."""

import errno
import os
import subprocess

import pytest

from components.common.errors import EXIT_DISK_FULL, DiskFullError
from components.config import build_config
from components.push import deployment, layout, push, staging
from runners.local.home import LocalPaths
from runners.local.run import _raise_named_failure
from tests.support.saved_models import fake_saved_model
from tests.support.disks import small_disk


def resize(path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(path)], check=True)


def files_under(root) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), root)
                  for d, _, names in os.walk(root) for n in names)


def fill(path) -> None:
    """Write zeros into `path` until the file system says it is full."""
    with open(path, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
        except OSError as err:
            assert err.errno == errno.ENOSPC


def through_the_run(serving_dir: str, tmp_path, error: BaseException) -> DiskFullError:
    """What `bigtrain run` makes of the Pusher's failure (TFX's launcher wraps it): the named
    error it raises, exit 7."""
    config = build_config("tiny", overrides=[f"paths.home={tmp_path / 'home'}",
                                             f"orchestrator.serving_dir={serving_dir}"])
    try:
        raise RuntimeError("Execution 9 failed") from error
    except RuntimeError as wrapped:
        with pytest.raises(DiskFullError) as named:
            _raise_named_failure(config, LocalPaths.for_config(config),
                                 (1, "DiskFullError: ..."), wrapped)
    return named.value


def test_the_serving_dir_filling_during_the_copy(tmp_path):
    fake_saved_model(tmp_path / "model", b"weights!" * 4096)         # 3.3 MB of variables
    with small_disk(tmp_path / "serving", "1m") as serving:
        base = os.path.join(serving, "gpt")
        with pytest.raises(DiskFullError) as err:
            push.push_model(str(tmp_path / "model"), base)
        assert err.value.exit_code == EXIT_DISK_FULL == 7
        assert f"no space left on device while pushing {tmp_path / 'model'} into {base} " \
               f"(No space left on device)" in str(err.value)
        assert files_under(serving) == []          # no staging folder, claim or temporary file
        assert sorted(os.listdir(base)) == [staging.CLAIMS_DIR]
        named = through_the_run(serving, tmp_path, err.value)
        assert named.exit_code == 7 and f"into {base}" in str(named)
        resize(serving, "16m")
        result = push.push_model(str(tmp_path / "model"), base)
        assert result.pushed and layout.served_versions(base) == [result.version]
        assert not [n for n in os.listdir(base) if n.startswith(".incoming-")]


def test_the_serving_dir_filling_at_the_deployment_files(tmp_path, monkeypatch):
    """The version is published, then models.config cannot be written: the version is taken
    back, the deployment files are the first push's again, the claims of this push are gone."""
    fake_saved_model(tmp_path / "a", b"model a " * 1024)
    fake_saved_model(tmp_path / "b", b"model b " * 1024)
    with small_disk(tmp_path / "serving", "8m") as serving:
        base = os.path.join(serving, "gpt")
        first = push.push_model(str(tmp_path / "a"), base)
        before = {name: open(os.path.join(base, name)).read()
                  for name in (layout.MODELS_CONFIG, layout.BATCHING_FILE)}
        files_before = files_under(serving)
        real_write = deployment.write_deployment_files

        def write_on_a_full_disk(*args, **kwargs):
            assert len(layout.served_versions(base)) == 2     # the new version is published
            fill(os.path.join(serving, "filler"))
            return real_write(*args, **kwargs)
        monkeypatch.setattr(deployment, "write_deployment_files", write_on_a_full_disk)
        with pytest.raises(DiskFullError, match=rf"into {base} \(No space left on device\)"):
            push.push_model(str(tmp_path / "b"), base)
        os.remove(os.path.join(serving, "filler"))
        assert files_under(serving) == files_before           # nothing new, nothing lost
        assert layout.served_versions(base) == [first.version]
        assert {name: open(os.path.join(base, name)).read() for name in before} == before
        monkeypatch.setattr(deployment, "write_deployment_files", real_write)
        second = push.push_model(str(tmp_path / "b"), base)
        assert second.pushed and layout.served_versions(base) == [first.version, second.version]
        assert layout.read_labels(base) == {"stable": first.version, "canary": second.version}
