"""Before a portable run whose SDK workers come from an external worker pool
(`--runner=PortableRunner --environment_type=EXTERNAL`): a one-element pipeline with the run's Beam
options must finish within runtime.sdk_worker_timeout_s, in a child process that is killed (with
the job service it started) when it does not.

Why: Beam's job service asks the pool for a worker and then waits for the worker's control
connection with no time limit. A pool started outside bigtrain's environment starts each worker
as `python` from its PATH, which fails with `No module named 'apache_beam'`, and the run then
hangs without a word (the pool's log is the only trace). One probe at run start turns that into
SdkWorkerError naming the endpoint and the likely cause, before any stage. Each Beam stage is a
Beam job of its own, which asks the pool for new workers: during the run every Beam stage probes
the pool again first (probing_each_beam_stage), so a pool that stopped, or was restarted where
its workers cannot start, fails that stage with the same named error instead of hanging it."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile

from components.common.errors import SdkWorkerError
from runners.beam import sdk_stall

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PROBE = "from runners.beam.sdk_workers import probe_main; probe_main()"
_FAILED = "sdk worker probe failed: "
_GRPC_DETAILS = re.compile(r'details = "([^"]*)"')   # the reason inside a gRPC error's text


def external_pool(beam_args: list[str]) -> str | None:
    """The worker pool's address when these options run on the PortableRunner with an EXTERNAL
    environment (the only case the probe covers), else None."""
    from apache_beam.options.pipeline_options import PipelineOptions, PortableOptions, StandardOptions
    options = PipelineOptions(list(beam_args))
    runner = options.view_as(StandardOptions).runner or ""
    portable = options.view_as(PortableOptions)
    if runner.rsplit(".", 1)[-1] != "PortableRunner" or (portable.environment_type or "").upper() != "EXTERNAL":
        return None
    return portable.environment_config or "(no --environment_config)"


# Beam stages a `pip freeze` of the submitting environment with every portable job, for the
# runner to compare with its workers' (~1 CPU-s, a process of its own); the probe is a check of
# its own, not a user's job: it skips that (the stages' own jobs still stage it).
_PROBE_EXPERIMENTS = ("--experiments=disable_logging_submission_environment",)


def probe_options(beam_args: list[str]):
    """The probe's PipelineOptions: the run's Beam options, without the environment listing."""
    from apache_beam.options.pipeline_options import PipelineOptions
    return PipelineOptions([*beam_args, *_PROBE_EXPERIMENTS])


def probe_main() -> None:
    """The child: one element through one Map on SDK workers (the options are sys.argv[1:])."""
    import apache_beam as beam
    try:
        with beam.Pipeline(options=probe_options(sys.argv[1:])) as pipeline:
            _ = pipeline | beam.Create([0]) | beam.Map(lambda x: x + 1)
    except Exception as err:  # one line for the parent's message: gRPC's `details` when present
        details = _GRPC_DETAILS.findall(str(err))
        lines = str(err).strip().splitlines()
        print(f"{_FAILED}{details[-1] if details else lines[0] if lines else type(err).__name__}",
              flush=True)
        sys.exit(1)


def _reason(log) -> str:
    """The probe's one-line failure, else the last gRPC `details` in what it wrote (a probe
    that died before its own line: Beam's job thread logs the error), else its last line; at
    most 300 characters."""
    log.seek(0)
    text = log.read().decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    failed = [line[len(_FAILED):] for line in lines if line.startswith(_FAILED)]
    details = _GRPC_DETAILS.findall(text)
    return ((failed or details or lines or ["no output"])[-1])[:300]


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def check_sdk_workers(beam_args: list[str], timeout_s: float, stage: str = "") -> None:
    """SdkWorkerError naming the pool when a portable run's SDK workers cannot run a pipeline
    within timeout_s seconds; nothing for other runners. stage: the Beam stage about to start
    (named in the message), or "" at the run's start."""
    endpoint = external_pool(beam_args)
    if endpoint is None:
        return
    print(f"checking the SDK worker pool at {endpoint}{f' before {stage}' if stage else ''} "
          f"(at most {timeout_s:g} s, runtime.sdk_worker_timeout_s)", flush=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryFile() as log:
        # Its own session: on a timeout the probe and the job service threads and processes it
        # started go together; the pool (and the workers it started) are the user's.
        proc = subprocess.Popen([sys.executable, "-c", _PROBE, *beam_args], stdout=log,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            _kill_group(proc)
        if code is None:
            raise SdkWorkerError(
                f"no SDK worker connected to {endpoint} within {timeout_s:g} s"
                f"{f' (before {stage})' if stage else ''} "
                f"(runtime.sdk_worker_timeout_s): is the worker pool running in an environment with "
                f"apache_beam (bigtrain's venv)? A pool started elsewhere logs `No module named "
                f"'apache_beam'` for each worker it starts")
        if code != 0:
            raise SdkWorkerError(
                f"the SDK worker pool at {endpoint} could not run a one-element pipeline"
                f"{f' before {stage}' if stage else ''} "
                f"({_reason(log)}): is a worker pool listening there? Start one from bigtrain's "
                f"venv: python -m apache_beam.runners.worker.worker_pool_main --service_port=PORT")


@contextlib.contextmanager
def probing_each_beam_stage(beam_args: list[str], timeout_s: float, stall_s: float | None = None):
    """While a portable run on an external pool runs: every Beam stage (TFX's BaseBeamExecutor
    makes its Beam pipeline) first runs check_sdk_workers with the stage's own Beam options, so
    a pool broken after the run started fails that stage with SdkWorkerError (recorded on the
    stage in MLMD) instead of hanging it. With stall_s (runtime.sdk_worker_stall_s) and the
    embedded job server, the stage's Beam job is also watched (runners/beam/sdk_stall.py): a worker
    that makes no progress for stall_s seconds fails it the same way. Other runners: nothing
    changes."""
    if external_pool(beam_args) is None:
        yield
        return
    from tfx.dsl.components.base import base_beam_executor
    executor = base_beam_executor.BaseBeamExecutor
    original = executor._make_beam_pipeline

    def probed(self):
        args, stage = list(self._beam_pipeline_args or beam_args), _stage_name(self)
        check_sdk_workers(args, timeout_s, stage=stage)
        pipeline = original(self)
        endpoint = external_pool(args)
        if stall_s is None or endpoint is None or not embedded_job_server(args):
            return pipeline
        return sdk_stall.watching_stalls(pipeline, endpoint, stage, stall_s)
    executor._make_beam_pipeline = probed
    try:
        with sdk_stall.bundle_progress_reported():
            yield
    finally:
        executor._make_beam_pipeline = original


def embedded_job_server(beam_args: list[str]) -> bool:
    """Whether Beam's job server (and so its Fn API runner) runs in this process
    (--job_endpoint=embed): only then can a stage's bundle progress be watched."""
    from apache_beam.options.pipeline_options import PipelineOptions, PortableOptions
    return PipelineOptions(list(beam_args)).view_as(PortableOptions).job_endpoint == "embed"


def _stage_name(executor) -> str:
    """The pipeline node an executor runs (e.g. StatisticsGen: TFX's executor classes are all
    named Executor), else its class name."""
    node = getattr(getattr(executor, "_context", None), "pipeline_node", None)
    return node.node_info.id if node is not None and node.node_info.id else type(executor).__name__
