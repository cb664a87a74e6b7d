"""`bigtrain run --runner DaskRunner --beam-arg=--dask_client_address=...` through the CLI, the
command of docs/scale-out.md, on the cluster `make dask` starts (tests/support/dask.sh): up to
StatisticsGen with a SentencePiece tokenizer, each run in a home of its own. TokenizerGen and
TextExampleGen run on the cluster and write the DirectRunner run's model and shards byte for
byte; StatisticsGen stays on the DirectRunner (runtime.beam_direct_stages); the run records where
each Beam stage ran and why on its MLMD context (bigtrain_beam_placement), and its report prints
those lines."""

import json
import os

import pytest

from components.tokenizer.base import DESCRIPTION_FILE
from pipeline.lineage import record
from pipeline.lineage.report import format_report
from tests.e2e.conftest import sentencepiece_args
from tests.support.dask_cluster import dask_address
from tests.support.data_stage import digest_tree
from tests.support.pipeline_run import PipelineHome

pytestmark = pytest.mark.slow


def scheduler_transitions(address: str) -> int:
    """How many task transitions the Dask scheduler has made: it grows when work reaches it."""
    from distributed import Client
    with Client(address, timeout=10) as client:
        return client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter)


def stage_outputs(run) -> dict[str, object]:
    """{path under the pipeline root: sha256} of every file TokenizerGen and TextExampleGen
    wrote, counters.json read with the run's home taken out (it names files in the home), a
    tokenizer description read without its training time."""
    root = os.path.join(run.home, "pipelines", "bigtrain")
    out = {}
    for stage in ("TokenizerGen", "TextExampleGen"):
        for path, digest in digest_tree(os.path.join(root, stage)).items():
            out[os.path.join(stage, path)] = digest
            if path.endswith("counters.json"):
                with open(os.path.join(root, stage, path), encoding="utf-8") as fh:
                    out[os.path.join(stage, path)] = fh.read().replace(run.home, "HOME")
            elif path.endswith(DESCRIPTION_FILE):
                with open(os.path.join(root, stage, path), encoding="utf-8") as fh:
                    description = json.load(fh)
                description["figures"].pop("training_seconds")
                out[os.path.join(stage, path)] = description
    return out


def test_a_dask_run_writes_the_direct_runs_bytes_and_names_where_each_stage_ran(
        tmp_path_factory, corpus, session_capsys):
    address = dask_address()
    args = sentencepiece_args(corpus[0])
    direct = PipelineHome(tmp_path_factory.mktemp("direct"), session_capsys, *args).run(
        "--until", "TextExampleGen")
    assert direct.exit_code == 0, direct.stderr
    before = scheduler_transitions(address)
    on_dask = PipelineHome(tmp_path_factory.mktemp("dask"), session_capsys, *args).run(
        "--until", "StatisticsGen", "--runner", "DaskRunner",
        f"--beam-arg=--dask_client_address={address}")
    assert on_dask.exit_code == 0, on_dask.stderr
    assert scheduler_transitions(address) > before   # the stages' work reached the cluster
    assert on_dask.states() == {"TokenizerGen": "complete", "TextExampleGen": "complete",
                                "StatisticsGen": "complete"}
    outputs = stage_outputs(on_dask)
    assert outputs == stage_outputs(direct)
    assert len([path for path in outputs if path.endswith(".gz")]) > 2   # the shards
    assert len([path for path in outputs if path.endswith("tokenizer.model")]) == 2
    expected = [f"TokenizerGen: DaskRunner (runtime.beam_args: {address})",
                f"TextExampleGen: DaskRunner (runtime.beam_args: {address})",
                "StatisticsGen: DirectRunner (TFDV's statistics fail on Beam's DaskRunner "
                "('NoneType' object has no attribute '__dask_keys__'))"]
    (context,) = [c for c in on_dask.store().get_contexts_by_type("pipeline_run")
                  if c.name == on_dask.run_id]
    assert json.loads(context.custom_properties[record.BEAM_PLACEMENT].string_value) == expected
    text = format_report(on_dask.report()).splitlines()
    at = text.index("where the Beam stages ran (runtime.beam_args, runtime.beam_direct_stages):")
    assert text[at + 1:at + 4] == [f"  {line}" for line in expected]
