"""A portable run whose SDK workers cannot start fails with SdkWorkerError naming the pool and
the likely cause within runtime.sdk_worker_timeout_s, leaving no process behind
(runners/beam/sdk_workers.py); a working pool passes the probe.

The broken pool is real: Beam's worker pool started with the venv's Python but with a `python`
on its PATH that lacks apache_beam (the system one), so each worker it starts dies with
`No module named 'apache_beam'`, as a pool started outside bigtrain's environment does. Catches:
the run hanging silently on it (Beam waits for the worker's control connection forever), a
message without the endpoint or the cause, a probe process (or its job service) left running."""

import os
import shutil
import subprocess

import psutil
import pytest
from tfx.dsl.components.base import base_beam_executor

from components import config as config_lib
from components.common.errors import SdkWorkerError
from runners.cli import app as cli
from runners.beam.sdk_workers import (check_sdk_workers, external_pool, probe_options,
                                      probing_each_beam_stage)
from tests.support.beam_worker_pool import free_port, portable_args, worker_pool
from tests.support.beam_stages import stage_pipeline

SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin")


def lacks_apache_beam(python) -> bool:
    return bool(python) and subprocess.run([python, "-c", "import apache_beam"],
                                           capture_output=True).returncode != 0


def descendants() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest.fixture(autouse=True)
def _descendants_before():
    """The pids this worker's earlier tests left (a session service, another test's leak): not
    this test's to answer for. CI failed on a W&B service process left by a tracking test."""
    _BEFORE.clear()
    _BEFORE.update(descendants())


_BEFORE: set[int] = set()


def processes_left(*keep: psutil.Process) -> set[int]:
    """This test process's descendants started during the test, but the given processes and
    theirs."""
    kept = {p.pid for k in keep for p in [k, *k.children(recursive=True)]}
    return descendants() - kept - _BEFORE


@pytest.fixture
def broken_pool(tmp_path):
    """(port, pool process, log path) of a pool whose workers cannot import apache_beam."""
    if not lacks_apache_beam(SYSTEM_PYTHON):
        pytest.skip("needs a python3 without apache_beam in /usr/bin to start the pool's workers")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(SYSTEM_PYTHON)
    log = tmp_path / "pool.log"
    # The pool itself runs on the venv's Python; the workers it spawns as `python` do not.
    with worker_pool(str(log), worker_bin=str(bin_dir)) as (port, pool):
        yield port, pool, log


def test_only_portable_runs_on_an_external_pool_are_probed():
    assert external_pool(["--direct_running_mode=in_memory"]) is None
    assert external_pool(["--runner=PortableRunner", "--environment_type=LOOPBACK"]) is None
    assert external_pool(["--runner=FlinkRunner", "--environment_type=EXTERNAL",
                          "--environment_config=localhost:5"]) is None
    assert external_pool(portable_args(5)) == "localhost:5"


def test_the_probe_skips_the_environment_listing_a_stage_keeps(tmp_path, monkeypatch):
    """Beam's stager (what a portable job's environment stages, the reference) runs `pip freeze`
    for the run's own options and not for the probe's. Caught: the experiment misspelled (Beam
    ignores a name it does not know) or dropped."""
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.portability.stager import SUBMISSION_ENV_DEPENDENCIES_FILE, Stager
    freezes = []
    monkeypatch.setattr(subprocess, "check_output",
                        lambda cmd, **_: freezes.append(cmd[-2:]) or b"apache-beam==2.59.0\n")
    for name, options in (("stage", PipelineOptions(portable_args(5))),
                          ("probe", probe_options(portable_args(5)))):
        (tmp_path / name).mkdir()
        Stager.create_job_resources(options, str(tmp_path / name))
    assert freezes == [["pip", "freeze"]]
    assert os.listdir(tmp_path / "stage") == [SUBMISSION_ENV_DEPENDENCIES_FILE]
    assert os.listdir(tmp_path / "probe") == []


@pytest.mark.parametrize("name", ["sdk_worker_timeout_s", "sdk_worker_stall_s"])
@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_the_timeout_must_be_a_positive_finite_number(name, value):
    with pytest.raises(config_lib.ConfigError, match=f"runtime.{name}"):
        config_lib.build_config("tiny", None, [f"runtime.{name}={value}"])


@pytest.mark.slow
def test_a_pool_whose_workers_lack_apache_beam_fails_the_run_naming_it(broken_pool, tmp_path, capsys):
    port, pool, log = broken_pool
    code = cli.main(["run", "--home", str(tmp_path / "home"), "--runner", "PortableRunner",
                     *[f"--beam-arg={arg}" for arg in portable_args(port)[1:]],
                     "--set", "runtime.sdk_worker_timeout_s=30"])
    err = capsys.readouterr().err
    assert code == SdkWorkerError.exit_code == 1, err
    assert f"no SDK worker connected to localhost:{port} within 30 s" in err, err
    assert "environment with apache_beam" in err, err
    assert "No module named 'apache_beam'" in log.read_text()   # the failure is the real one
    assert processes_left(psutil.Process(pool.pid)) == set()


@pytest.mark.slow
def test_a_closed_port_fails_naming_the_endpoint():
    port = free_port()
    with pytest.raises(SdkWorkerError, match=f"localhost:{port}") as raised:
        check_sdk_workers(portable_args(port), 60)
    assert "Connection refused" in str(raised.value) and "worker pool listening" in str(raised.value)
    assert processes_left() == set()


@pytest.mark.slow
def test_a_working_pool_passes_the_probe(tmp_path):
    log = tmp_path / "pool.log"
    with worker_pool(str(log)) as (port, pool):
        check_sdk_workers(portable_args(port), 120)
        assert processes_left(psutil.Process(pool.pid)) == set()
    assert log.read_text().count("Starting worker with command") == 1


@pytest.mark.slow
def test_each_beam_stage_probes_the_pool_before_making_its_pipeline(tmp_path):
    """During a run (probing_each_beam_stage) a Beam stage gets its pipeline only after the pool
    ran a probe: a working pool starts one more worker for it; a pool gone since the run started
    (a closed port here) fails the stage with SdkWorkerError naming the endpoint and the stage,
    where the stage's Beam job would have waited for a worker. TFX's own method is back after
    the run; a run on another runner is not probed."""
    original = base_beam_executor.BaseBeamExecutor._make_beam_pipeline
    log = tmp_path / "pool.log"
    with worker_pool(str(log)) as (port, pool):
        with probing_each_beam_stage(portable_args(port), 120):
            assert stage_pipeline(portable_args(port)) is not None
        assert log.read_text().count("Starting worker with command") == 1
        assert processes_left(psutil.Process(pool.pid)) == set()
    closed = free_port()
    with probing_each_beam_stage(portable_args(closed), 60):
        with pytest.raises(SdkWorkerError, match=rf"pool at localhost:{closed} could not run a "
                                                 r"one-element pipeline before StatisticsGen"):
            stage_pipeline(portable_args(closed))
    assert base_beam_executor.BaseBeamExecutor._make_beam_pipeline is original
    with probing_each_beam_stage(["--direct_running_mode=in_memory"], 60):
        assert base_beam_executor.BaseBeamExecutor._make_beam_pipeline is original
    assert processes_left() == set()


def test_the_reason_is_the_grpc_details_when_the_probe_died_before_its_own_line():
    """Seen once under load: the probe exited non-zero without its own line, the log ending in
    the `>` of a gRPC error's repr; the message said `(>)` instead of `Connection refused`."""
    import tempfile

    from runners.beam.sdk_workers import _reason
    with tempfile.TemporaryFile() as log:
        log.write(b'grpc._channel._InactiveRpcError: <_InactiveRpcError of RPC that terminated with:\n'
                  b'\tstatus = StatusCode.UNAVAILABLE\n\tdetails = "failed to connect to all '
                  b'addresses; last error: Connection refused"\n>\n')
        assert _reason(log) == "failed to connect to all addresses; last error: Connection refused"
    with tempfile.TemporaryFile() as log:
        log.write(b"noise\nsdk worker probe failed: its own line wins\n")
        assert _reason(log) == "its own line wins"


def test_the_probe_puts_the_repository_root_on_its_path():
    """The probe runs `from runners.beam.sdk_workers import probe_main` in a fresh interpreter with
    ROOT on its PYTHONPATH: ROOT is the folder holding the `runners` package (this test file's
    own place says where that is), not a folder inside it. An editable install hides a wrong
    ROOT on this machine; a worker without the install would not find the module."""
    from runners.beam import sdk_workers
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert os.path.samefile(sdk_workers.ROOT, repo)
