"""The data stage on Beam's PortableRunner with SDK workers in separate processes (an external
worker pool, tests/support/beam_worker_pool.py: the Fn API path Flink, Spark and Dataflow use),
and a worker killed mid-stage.

The stage's counters are each unit's count file summed (unit_counts.py: no runner metrics; a
retried unit rewrites its own file), and the test checks they equal the DirectRunner's."""

import os
import threading
import time

import psutil
import pytest
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline

from components.storage import fs
from components.text_example_gen import shards, transforms
from components.text_example_gen.component import check_accounting, stage_counters
from tests.support.data_stage import BEAM_ARGS, digest_tree, reader_config, stage_files
from tests.support.beam_worker_pool import portable_args, worker_pids, worker_pool

pytestmark = pytest.mark.slow

PIDS = "test.worker_pids"
STAGE = dict(seq_len=64, eval_fraction=0.3, split_salt="", train_shards=3, eval_shards=2)


class PidRecordingConvertUnitFn(transforms.ConvertUnitFn):
    """ConvertUnitFn that also counts each unit under the id of the process that converted it."""

    def process(self, unit, *args, **kwargs):
        Metrics.counter(PIDS, str(os.getpid())).inc()
        yield from super().process(unit, *args, **kwargs)


class SlowConvertUnitFn(PidRecordingConvertUnitFn):
    """Half a second per unit: the stage lasts long enough to kill its worker mid-way."""

    def process(self, unit, *args, **kwargs):
        time.sleep(0.5)
        yield from super().process(unit, *args, **kwargs)


def run_stage(files, out_dir, beam_args, convert_class=transforms.ConvertUnitFn):
    """The stage as the executor runs it (pieces removed after the pipeline); returns (counters,
    {pid: units converted there})."""
    stage = transforms.TextToTFRecordShards(
        files, out_dir, reader_config=reader_config(document="separator", range_bytes=40_000),
        **STAGE)
    stage._convert.__class__ = convert_class  # same state, a subclass that also records its pid
    # TestPipeline(argv=...) keeps only --test-pipeline-options and drops every other argument
    # (the runner included): the options must be passed as PipelineOptions.
    p = TestPipeline(options=PipelineOptions(beam_args), blocking=True)
    _ = p | stage
    result = p.run()
    result.wait_until_finish()
    counters = stage_counters(out_dir, units=stage.units)
    fs.rmtree(os.path.join(out_dir, shards.PIECES_DIR))
    pids = {int(c.key.metric.name): int(c.committed or c.attempted or 0) for c in
            result.metrics().query(MetricsFilter().with_namespace(PIDS))["counters"]}
    return counters, pids


def test_portable_runner_with_separate_sdk_workers_writes_the_direct_runners_bytes(corpus, tmp_path):
    """Catches: a DoFn that depends on state of the launching process (a tokenizer loaded only
    there, a module global), a counter lost on the Fn API path (committed None read as 0), and any
    output that depends on which worker ran a unit."""
    files = stage_files(corpus, tmp_path)
    direct, direct_pids = run_stage(files, str(tmp_path / "direct"), BEAM_ARGS,
                                    PidRecordingConvertUnitFn)
    assert set(direct_pids) == {os.getpid()}  # the DirectRunner in memory: this process
    with worker_pool(str(tmp_path / "pool.log")) as (port, pool):
        portable, pids = run_stage(files, str(tmp_path / "portable"), portable_args(port),
                                   PidRecordingConvertUnitFn)
        workers = set(worker_pids(pool))
    units = len(transforms.readers.plan_units(files, reader_config(document="separator",
                                                                   range_bytes=40_000)))
    assert units > 10 and sum(direct_pids.values()) == units
    # Every unit was converted in an SDK worker process the pool started, none in this one.
    assert sum(pids.values()) == units, pids
    assert os.getpid() not in pids and set(pids) <= workers, (pids, workers)
    assert portable == direct
    check_accounting(portable, len(files), "manifest")
    assert digest_tree(str(tmp_path / "portable")) == digest_tree(str(tmp_path / "direct"))


def _run_in_thread(files, out_dir, args):
    outcome = {}

    def target():
        try:
            outcome["counters"] = run_stage(files, out_dir, args, SlowConvertUnitFn)
        except BaseException as error:  # the run's failure is the outcome under test
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


def _wait_for_pieces(out_dir, thread, timeout=300.0):
    """Until the stage has committed at least one piece (it is mid-way)."""
    pieces = os.path.join(out_dir, shards.PIECES_DIR)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and thread.is_alive():
        if os.path.isdir(pieces) and any(".tmp" not in n for n in os.listdir(pieces)):
            return
        time.sleep(0.2)
    raise AssertionError(f"no piece under {pieces} (stage alive: {thread.is_alive()})")


def test_worker_killed_mid_stage_then_rerun_gives_the_same_shards(corpus, tmp_path):
    """SIGKILL the SDK worker once the stage has committed a piece: the run fails (Beam's Python
    job server does not retry a bundle whose worker died); re-running the stage into the same
    output folder (the killed attempt's pieces and temporary files still there) gives the
    DirectRunner's bytes. Catches: fixed temporary names (two attempts writing one file), a
    piece deleted by the killed attempt, a half-written piece taken as committed."""
    files = stage_files(corpus, tmp_path)
    reference, _ = run_stage(files, str(tmp_path / "direct"), BEAM_ARGS)
    out_dir = str(tmp_path / "out")
    with worker_pool(str(tmp_path / "pool1.log")) as (port, pool):
        thread, outcome = _run_in_thread(files, out_dir, portable_args(port))
        _wait_for_pieces(out_dir, thread)
        killed = worker_pids(pool)
        assert killed, "no SDK worker process to kill"
        for pid in killed:
            psutil.Process(pid).kill()
        thread.join(timeout=300)
    assert not thread.is_alive(), "the run hung after its worker was killed"
    assert "error" in outcome, f"the run survived the kill of {killed}: {outcome}"
    with worker_pool(str(tmp_path / "pool2.log")) as (port, _):
        rerun, _ = run_stage(files, out_dir, portable_args(port))
    assert rerun == reference
    assert digest_tree(out_dir) == digest_tree(str(tmp_path / "direct"))
