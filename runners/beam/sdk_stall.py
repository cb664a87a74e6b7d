"""While a Beam stage of a portable run on an external worker pool runs (the embedded job server,
`--job_endpoint=embed`): a watchdog that fails the stage with SdkWorkerError when its SDK worker
makes no progress for runtime.sdk_worker_stall_s, instead of letting the stage wait forever.

Why: a worker that connected and then stalls (stuck in user code or a deadlock, SIGSTOP'ed,
swapping out of memory) leaves Beam's job service waiting for its bundle without a time limit,
and the pool stays healthy, so the probe before each stage (runners/beam/sdk_workers.py) passes.

The signal: bundle progress. Beam's job API shows nothing that moves during a bundle (the
embedded job service's GetJobMetrics is empty until the job ends, its state stream says
RUNNING, its messages are logs, and a worker flushes its output only by size), but the Fn API
runner can ask the worker for a running bundle's progress (ProcessBundleProgressRequest), whose
element counts and user counters grow with each element done; its execution-time counters are
left out, as they grow in a DoFn that never returns. Progress is a bundle starting or ending or
those figures changing; a worker that does not answer (stopped) shows none. The runner runs in
the launching process here, so its ProgressRequester (off by default) is swapped, during a run,
for one that polls and reports here; with any other job endpoint the runner is elsewhere and no
stall is watched (the probe still runs).

On a stall: the pool stops the bundle's worker (StopWorker, as Beam itself never asks), which
fails the job's bundle, the job is cancelled (its job service stopped), and the stage raises."""

from __future__ import annotations

import contextlib
import threading
import time

from components.common.errors import SdkWorkerError

# Monitoring infos that change only when elements move: counts per PCollection, the data
# channel's read index, user counters (no execution times: they grow in a stuck DoFn too).
_MOVING = frozenset({"beam:metric:element_count:v1", "beam:metric:data_channel:read_index:v1",
                     "beam:metric:user:sum_int64:v1", "beam:metric:user:sum_double:v1"})
_current: StallWatch | None = None     # the stage whose Beam job runs now (stages run one by one)


class StallWatch:
    """One stage's Beam job: its bundles in flight and when anything last moved."""

    def __init__(self, endpoint: str, stage: str, stall_s: float):
        self.endpoint, self.stage, self.stall_s = endpoint, stage, stall_s
        self.poll_s = min(5.0, stall_s / 6)
        self._lock = threading.Lock()
        self._bundles: dict[object, list] = {}    # requester -> [worker handler, last figures]
        self._moved = time.monotonic()

    def started(self, requester) -> None:
        with self._lock:
            self._bundles[requester] = [requester._worker_handler, None]
            self._moved = time.monotonic()

    def finished(self, requester) -> None:
        with self._lock:
            self._bundles.pop(requester, None)
            self._moved = time.monotonic()

    def reported(self, requester, progress) -> None:
        figures = frozenset((info.urn, tuple(sorted(info.labels.items())), info.payload)
                            for info in progress.monitoring_infos if info.urn in _MOVING)
        with self._lock:
            bundle = self._bundles.get(requester)
            if bundle is not None and bundle[1] != figures:
                bundle[1] = figures
                self._moved = time.monotonic()

    def idle_s(self) -> float:
        """Seconds since anything moved while a bundle is in flight (0 between bundles: work
        the runner does itself is not a worker's)."""
        with self._lock:
            return time.monotonic() - self._moved if self._bundles else 0.0

    def handlers(self) -> list:
        """The Fn API runner's handles on the workers of the bundles in flight."""
        with self._lock:
            return list({id(h): h for h, _ in self._bundles.values()}.values())

    def error(self, idle_s: float) -> SdkWorkerError:
        return SdkWorkerError(
            f"the SDK worker from the pool at {self.endpoint} made no progress in {self.stage} "
            f"for {idle_s:.0f} s (runtime.sdk_worker_stall_s={self.stall_s:g}): a worker stuck in "
            f"user code (a DoFn that never returns, a deadlock), stopped (SIGSTOP) or out of "
            f"memory; see the worker pool's log. The stage's Beam job was cancelled and its "
            f"worker stopped")


def _requester_class():
    """fn_runner.ProgressRequester that, while a stage is watched, polls every poll_s and
    reports to the watch; otherwise Beam's own."""
    from apache_beam.runners.portability.fn_api_runner import fn_runner

    class WatchedProgressRequester(fn_runner.ProgressRequester):
        def __init__(self, worker_handler, instruction_id, frequency, callback=None):
            self._watch = watch = _current
            if watch is not None:
                frequency = frequency or watch.poll_s
                callback = _reporting(watch, self, callback)
            super().__init__(worker_handler, instruction_id, frequency, callback)

        def __enter__(self):
            if self._watch is not None:
                self._watch.started(self)
            return super().__enter__()

        def __exit__(self, *exc_info):
            if self._watch is not None:
                self._watch.finished(self)
            return super().__exit__(*exc_info)
    return fn_runner, WatchedProgressRequester


def _reporting(watch: StallWatch, requester, callback):
    def report(progress):
        watch.reported(requester, progress)
        if callback is not None:
            callback(progress)
    return report


@contextlib.contextmanager
def bundle_progress_reported():
    """During a run: Beam's Fn API runner (in this process) asks watched stages' workers for
    their bundles' progress."""
    fn_runner, watched = _requester_class()
    original = fn_runner.ProgressRequester
    fn_runner.ProgressRequester = watched
    try:
        yield
    finally:
        fn_runner.ProgressRequester = original


def watching_stalls(pipeline, endpoint: str, stage: str, stall_s: float):
    """The pipeline, its run's wait_until_finish watched: SdkWorkerError after stall_s seconds
    without progress of a bundle in flight."""
    original_run = pipeline.run

    def run(*args, **kwargs):
        global _current
        watch = _current = StallWatch(endpoint, stage, stall_s)
        try:
            result = original_run(*args, **kwargs)
        except BaseException:
            _current = None
            raise
        wait = result.wait_until_finish
        result.wait_until_finish = lambda *a, **k: _wait_watching(result, wait, watch, a, k)
        return result
    pipeline.run = run
    return pipeline


def _wait_watching(result, wait, watch: StallWatch, args, kwargs):
    """Beam's wait_until_finish in a thread of its own; this one watches for a stall."""
    global _current
    outcome: dict = {}
    done = threading.Event()

    def waiting():
        try:
            outcome["state"] = wait(*args, **kwargs)
        except BaseException as err:  # handed to the caller below
            outcome["error"] = err
        finally:
            done.set()
    threading.Thread(target=waiting, name="bigtrain-beam-wait", daemon=True).start()
    try:
        while not done.wait(watch.poll_s):
            idle = watch.idle_s()
            if idle >= watch.stall_s:
                _stop(result, watch)
                done.wait(60)   # the job fails once its worker is gone
                raise watch.error(idle) from outcome.get("error")
    finally:
        _current = None
    if "error" in outcome:
        raise outcome["error"]
    return outcome["state"]


def _stop(result, watch: StallWatch) -> None:
    """The pool stops the stalled bundles' workers (its StopWorker: SIGTERM, SIGKILL 10 s
    later); the runner stops waiting for them (their data channel closed, their pending
    instructions aborted: the worker's death alone left Beam's job thread waiting here); then
    the job is cancelled, which stops its job service."""
    import grpc
    from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc
    print(f"{watch.stage}: no progress from the SDK worker for {watch.stall_s:g} s "
          f"(runtime.sdk_worker_stall_s): stopping it", flush=True)
    handlers = watch.handlers()
    with grpc.insecure_channel(watch.endpoint) as channel:
        pool = beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolStub(channel)
        for handler in handlers:
            with contextlib.suppress(grpc.RpcError):
                pool.StopWorker(beam_fn_api_pb2.StopWorkerRequest(worker_id=handler.worker_id),
                                timeout=30)
    for handler in handlers:
        handler.data_conn.close()
        handler.control_conn.abort(RuntimeError(f"stopped: no progress for {watch.stall_s:g} s"))
    with contextlib.suppress(Exception):  # already failed: nothing to cancel
        result.cancel()
