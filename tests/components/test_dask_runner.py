"""The data stage on Beam's DaskRunner, on the Dask cluster `make dask` starts (a scheduler on
loopback and 2 worker processes, tests/support/dask.sh): the same shards, quarantine manifest
and counters as the DirectRunner's, every unit converted in a Dask worker process; TokenizerGen's
sample and model the same bytes as the DirectRunner's, every unit read in a worker; and where
each Beam stage runs (components/config/beam_placement.py)."""

import functools
import os

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline

from components.config import beam_placement
from components.storage import fs
from components.text_example_gen import shards, transforms
from components.text_example_gen.component import check_accounting, stage_counters
from components.tokenizer import sample_pipeline, stage
from tests.support.data_stage import BEAM_ARGS, digest_tree, reader_config, stage_files
from tests.support.dask_cluster import dask_address, worker_pids
from tests.support.tokenizer_sample import data_config, make_sample_input

STAGE = dict(seq_len=64, eval_fraction=0.3, split_salt="", train_shards=3, eval_shards=2,
             dedup="near")


def dask_args(address: str) -> list[str]:
    """What a user passes (--runner DaskRunner --beam-arg --dask_client_address=...) after the
    run's default Beam args (DirectRunner options that Dask's client must not receive)."""
    return beam_placement.resolved_args(BEAM_ARGS + ["--runner", "DaskRunner",
                                                     f"--dask_client_address={address}"])


class PidFileConvertUnitFn(transforms.ConvertUnitFn):
    """ConvertUnitFn that also writes, per unit, the id of the process that converted it."""

    def process(self, unit, *args, **kwargs):
        fs.write_text(os.path.join(self._output_dir + "-pids", f"{unit.index}"), str(os.getpid()))
        yield from super().process(unit, *args, **kwargs)


def run_stage(files, out_dir, beam_args):
    """The stage as the executor runs it (counters from the units' files, then the pieces
    removed); returns (counters, {unit: pid that converted it})."""
    os.makedirs(out_dir + "-pids")
    stage = transforms.TextToTFRecordShards(
        files, out_dir, reader_config=reader_config(document="separator", range_bytes=40_000),
        **STAGE)
    stage._convert.__class__ = PidFileConvertUnitFn  # same state, also records its pid
    p = TestPipeline(options=PipelineOptions(beam_args), blocking=True)
    _ = p | stage
    p.run().wait_until_finish()
    counters = stage_counters(out_dir, units=stage.units)
    fs.rmtree(os.path.join(out_dir, shards.PIECES_DIR))
    pids = {int(n): int(open(os.path.join(out_dir + "-pids", n)).read())
            for n in os.listdir(out_dir + "-pids")}
    return counters, pids


@pytest.mark.slow
def test_dask_runner_writes_the_direct_runners_bytes_on_the_workers(corpus, tmp_path):
    """Catches: counters read from runner metrics (the DaskRunner has none: NotImplementedError),
    Dask's client given the DirectRunner's options (TypeError in distributed.Client), a side
    input, tagged output or setup() the DaskRunner mishandles (near dedup uses all three), and
    any output that depends on which worker ran a unit."""
    address = dask_address()
    files = stage_files(corpus, tmp_path)
    direct, direct_pids = run_stage(files, str(tmp_path / "direct"), BEAM_ARGS)
    on_dask, pids = run_stage(files, str(tmp_path / "dask"), dask_args(address))
    assert len(pids) > 10 and set(direct_pids.values()) == {os.getpid()}
    workers = worker_pids(address)
    assert len(workers) == 2 and set(pids.values()) <= workers, (pids, workers)
    assert on_dask == direct
    assert direct["documents_skipped_near_duplicate"] > 0   # near dedup had work to do
    check_accounting(on_dask, len(files), "manifest")
    assert digest_tree(str(tmp_path / "dask")) == digest_tree(str(tmp_path / "direct"))


class PidCandidatesFn(sample_pipeline.CandidatesFn):
    """CandidatesFn that also writes, per unit, the id of the process that read it."""

    def __init__(self, *args, pid_dir: str, **kwargs):
        super().__init__(*args, **kwargs)
        self._pid_dir = pid_dir

    def process(self, unit):
        fs.write_text(os.path.join(self._pid_dir, f"{unit.index}"), str(os.getpid()))
        yield from super().process(unit)


def build_tokenizer(data, out_dir, beam_args, monkeypatch):
    """TokenizerGen's work (stage.build_tokenizer) with its sample read on `beam_args`; returns
    (model bytes, figures but the training time, the samples and skipped records read,
    {unit: pid that read it})."""
    os.makedirs(out_dir + "-pids")
    read_samples, read = sample_pipeline.read_samples, []

    def recorded(*args):
        read.append(read_samples(*args))
        return read[-1]
    with monkeypatch.context() as patch:
        patch.setattr(sample_pipeline, "CandidatesFn",
                      functools.partial(PidCandidatesFn, pid_dir=out_dir + "-pids"))
        patch.setattr(sample_pipeline, "read_samples", recorded)
        tokenizer, figures = stage.build_tokenizer(
            data, out_dir, lambda: beam.Pipeline(options=PipelineOptions(beam_args)))
    pids = {int(n): int(open(os.path.join(out_dir + "-pids", n)).read())
            for n in os.listdir(out_dir + "-pids")}
    figures.pop("training_seconds")
    return tokenizer.model_proto, figures, read, pids


@pytest.mark.slow
def test_tokenizer_sample_on_dask_is_the_direct_runners_on_the_workers(corpus, tmp_path,
                                                                        monkeypatch):
    """TokenizerGen's sample read on the DaskRunner: the same samples, skipped records, figures
    and SentencePiece model bytes as on the DirectRunner, every unit read in a Dask worker
    process. Catches: a per-document or per-unit element the DaskRunner hands to the wrong
    consumer (it gives every output of a DoFn, tagged or not, to each: 'SampleAccumulator'
    object is not iterable), a figure counted twice or lost on the way, and a sample that
    depends on where a unit was read."""
    address = dask_address()
    data = data_config(make_sample_input(corpus[0], tmp_path / "input"), document="separator",
                       separator="\n\n")
    direct = build_tokenizer(data, str(tmp_path / "direct"), BEAM_ARGS, monkeypatch)
    on_dask = build_tokenizer(data, str(tmp_path / "dask"), dask_args(address), monkeypatch)
    model, figures, read, pids = on_dask
    assert len(pids) > 5 and set(direct[3].values()) == {os.getpid()}
    workers = worker_pids(address)
    assert len(workers) == 2 and set(pids.values()) <= workers, (pids, workers)
    assert read == direct[2] and len(read) == 1
    samples, skipped = read[0]
    assert skipped["duplicate"] > 100 and samples["eval"].texts   # dedup across units had work
    assert figures == direct[1] and figures["sample_bytes"] == 30_000
    assert model == direct[0]


def test_stage_counters_sum_each_units_file_once_and_name_a_missing_one(tmp_path):
    """Each unit's counts (a retried unit's file replaced, not added); a unit without its file is
    an error naming the folder, not a smaller total."""
    from components.text_example_gen import unit_counts
    out = str(tmp_path)
    os.makedirs(os.path.join(out, shards.PIECES_DIR))
    unit_counts.write_counts(out, 0, {"files_seen": 2, "bytes_read": 10, "tokens_real": 0})
    unit_counts.write_counts(out, 1, {"files_seen": 5, "bytes_read": 1})
    unit_counts.write_counts(out, 1, {"files_seen": 1, "bytes_read": 7})   # the retry's
    counters = stage_counters(out, units=2)
    assert counters["files_seen"] == 3 and counters["bytes_read"] == 17
    assert counters["tokens_real"] == 0 and counters["sequences_train"] == 0
    with pytest.raises(RuntimeError, match=r"3 units planned, 2 wrote their counts in .*\.pieces"):
        stage_counters(out, units=3)


@pytest.mark.parametrize("args, runner", [
    ([], "DirectRunner"),
    (["--runner=DaskRunner"], "DaskRunner"),
    (["--runner=dask"], "DaskRunner"),
    (["--runner", "DaskRunner", "--dask_client_address=tcp://h:1"], "DaskRunner"),
    (["--runner=DaskRunner", "--runner=FlinkRunner"], "FlinkRunner"),
    ([f"--runner={beam_placement.DASK_RUNNER}"], "DaskRunner"),
])
def test_runner_of_names_the_last_runner(args, runner):
    assert beam_placement.runner_of(args) == runner


def test_resolved_args_give_beam_the_dask_runners_class_and_keep_the_rest():
    assert beam_placement.resolved_args(
        ["--direct_num_workers=1", "--runner", "DaskRunner", "--dask_client_address=tcp://h:1"]
    ) == ["--direct_num_workers=1", f"--runner={beam_placement.DASK_RUNNER}",
          "--dask_client_address=tcp://h:1"]
    assert beam_placement.resolved_args(["--runner=FlinkRunner"]) == ["--runner=FlinkRunner"]


def test_a_dask_run_without_a_scheduler_is_a_config_error_naming_the_option():
    from components.config import ConfigError
    with pytest.raises(ConfigError, match="--dask_client_address=tcp://HOST:PORT"):
        beam_placement.resolved_args(["--runner", "DaskRunner"])


def test_a_direct_stage_runs_on_the_direct_runner_with_its_reason():
    """StatisticsGen (in the default runtime.beam_direct_stages) on the DirectRunner under a Dask
    run, naming why; TextExampleGen on Dask; under the DirectRunner nothing is moved."""
    from components.config import RuntimeConfig
    direct_stages = RuntimeConfig().beam_direct_stages
    dask = ["--runner=DaskRunner", "--dask_client_address=tcp://127.0.0.1:1"]
    assert beam_placement.stage_args("StatisticsGen", dask, direct_stages) == [
        "--runner=DirectRunner"]
    assert beam_placement.stage_args("TextExampleGen", dask, direct_stages) == []
    assert beam_placement.stage_args("StatisticsGen", [], direct_stages) == []
    assert beam_placement.stage_args("StatisticsGen", ["--runner=PortableRunner"],
                                     direct_stages) == []
    lines = beam_placement.placement_lines(["TextExampleGen", "StatisticsGen", "Mine"], dask,
                                           ("StatisticsGen", "Mine"))
    assert lines == ["TextExampleGen: DaskRunner (runtime.beam_args: tcp://127.0.0.1:1)",
                     "StatisticsGen: DirectRunner (TFDV's statistics fail on Beam's DaskRunner "
                     "('NoneType' object has no attribute '__dask_keys__'))",
                     "Mine: DirectRunner (runtime.beam_direct_stages names it)"]
