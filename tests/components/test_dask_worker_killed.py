"""A Dask worker killed mid-stage (issue 59 item 2): on a private Dask cluster (a scheduler and
2 worker processes, each under a nanny that restarts it), one worker is SIGKILLed while it holds
a unit it has converted (its pieces and count file written, its output not yet handed on). Dask
runs the unit again on a worker; the stage's shards, quarantine manifest and counters are still
the DirectRunner's, byte for byte, and nothing else is left in the output folder (no temporary
or partial file next to the shards)."""

import os
import signal
import threading
import time

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline

from components.config import beam_placement
from components.storage import fs
from components.text_example_gen import shards, transforms
from components.text_example_gen.component import check_accounting, stage_counters
from tests.support.data_stage import BEAM_ARGS, digest_tree, reader_config, stage_files

pytestmark = pytest.mark.slow

STAGE = dict(seq_len=64, eval_fraction=0.3, split_salt="", train_shards=3, eval_shards=2)
VICTIM = 3   # the unit whose first attempt is killed


class StallingConvertUnitFn(transforms.ConvertUnitFn):
    """ConvertUnitFn that records each attempt (unit-<index>-<pid>) and, on unit VICTIM's first
    attempt, stalls after converting it: the test kills that process there."""

    def process(self, unit, *args, **kwargs):
        written = super().process(unit, *args, **kwargs)
        fs.write_text(os.path.join(self._marks, f"unit-{unit.index}-{os.getpid()}"), "")
        first = os.path.join(self._marks, "victim")
        if unit.index == VICTIM and not os.path.exists(first):
            fs.write_text(first, str(os.getpid()))
            time.sleep(300)
        return written


def run_stage(files, out_dir, beam_args, marks=None):
    stage = transforms.TextToTFRecordShards(
        files, out_dir, reader_config=reader_config(document="separator", range_bytes=40_000),
        **STAGE)
    if marks:
        stage._convert.__class__ = StallingConvertUnitFn   # same state, and the stall
        stage._convert._marks = marks
    p = TestPipeline(options=PipelineOptions(beam_args), blocking=True)
    _ = p | stage
    p.run().wait_until_finish()
    counters = stage_counters(out_dir, units=stage.units)
    fs.rmtree(os.path.join(out_dir, shards.PIECES_DIR))
    return counters, stage.units


def kill_the_victim(marks: str, killed: list, stop: threading.Event):
    """Waits for the stalled attempt's pid, then SIGKILLs it."""
    path = os.path.join(marks, "victim")
    while not stop.is_set():
        if os.path.exists(path) and open(path).read():
            pid = int(open(path).read())
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            return
        time.sleep(0.2)


@pytest.fixture
def cluster():
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=0,
                      dashboard_address=None) as local:
        yield local


def worker_pids(address: str) -> set[int]:
    from distributed import Client
    with Client(address, timeout=10) as client:
        return set(client.run(os.getpid).values())


def test_a_killed_dask_worker_is_retried_and_the_shards_are_the_direct_runners(
        corpus, tmp_path, cluster):
    """Catches: a unit's work counted or ordered twice when its first attempt wrote its pieces
    and counts before dying (a count file per attempt, a total from every piece record), and a
    temporary file of the killed attempt left beside the shards."""
    files = stage_files(corpus, tmp_path)
    address = cluster.scheduler_address
    before = worker_pids(address)
    direct, units = run_stage(files, str(tmp_path / "direct"), BEAM_ARGS)
    assert units > VICTIM + 5
    marks = str(tmp_path / "marks")
    os.makedirs(marks)
    killed, stop = [], threading.Event()
    killer = threading.Thread(target=kill_the_victim, args=(marks, killed, stop), daemon=True)
    killer.start()
    try:
        args = beam_placement.resolved_args(
            BEAM_ARGS + ["--runner=DaskRunner", f"--dask_client_address={address}"])
        on_dask, _ = run_stage(files, str(tmp_path / "dask"), args, marks)
    finally:
        stop.set()
        killer.join(5)
    assert len(killed) == 1 and killed[0] in before, (killed, before)
    attempts = sorted(int(n.split("-")[2]) for n in os.listdir(marks)
                      if n.startswith(f"unit-{VICTIM}-"))
    # killed, then run again (more than once is Dask's: it recomputes a side input's upstream)
    assert len(attempts) >= 2 and killed[0] in attempts, attempts
    assert worker_pids(address) != before                           # the nanny's new worker
    assert on_dask == direct
    check_accounting(on_dask, len(files), "manifest")
    assert digest_tree(str(tmp_path / "dask")) == digest_tree(str(tmp_path / "direct"))
