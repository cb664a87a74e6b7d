"""The data stage's whole cleaning on a mixture, end to end through its TFX executor: two sources
(text and JSONL, weights 2.5 and 0.3, the second with its own filter list), exact then near
dedup, two quality filters and decontamination against an evaluation file. The DirectRunner in
one process, the DirectRunner with two worker processes and the PortableRunner with SDK workers
in separate processes write the same shards and manifest; `bigtrain lineage summary` of a model
pushed from those Examples names every step with the counts the stage recorded."""

import os

import pytest

from components import config as config_lib
from components.storage import listing
from components.text_example_gen import transforms
from pipeline.lineage import content, render
from pipeline.lineage.store import Lineage, properties
from tests.support.mixture_sources import make_sources, shard_digests
from tests.support.mixture_sources import _pushed_run
from benchmarks.support.lineage_store import Builder
from benchmarks.support.mlmd import connect
from tests.support.mixture_sources import cleaning_data, plant

pytestmark = pytest.mark.slow

PATH_VALUED = ("quarantine_manifest", "input_listing", "sources")


def run_executor(data: config_lib.DataConfig, uri: str, beam_args: list[str]):
    from tfx.dsl.components.base import base_beam_executor
    from tfx.types import standard_artifacts
    from components.text_example_gen.component import TextExampleGenExecutor
    examples = standard_artifacts.Examples()
    examples.uri = uri
    os.makedirs(uri)
    context = base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=beam_args)
    TextExampleGenExecutor(context).Do({}, {"examples": [examples]}, {
        "data_config": config_lib.section_json(data), "input_fingerprint": listing.UNRESOLVED})
    return examples


def outputs(examples) -> tuple[dict, dict]:
    """(digests of the shards and the manifest, every figure that is not a path)."""
    digests = {k: v for k, v in shard_digests(examples.uri).items()
               if k.startswith("Split-") or k == transforms.QUARANTINE_MANIFEST}
    figures = {k: v for k, v in properties(examples.mlmd_artifact).items()
               if k not in PATH_VALUED}
    return digests, figures


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from tests.support.beam_worker_pool import portable_args, worker_pool
    root = tmp_path_factory.mktemp("cleaning")
    corpus = make_sources(str(root / "corpus"))
    data = cleaning_data(corpus, plant(corpus, str(root)))
    made = {"one": run_executor(data, str(root / "one"), []),
            "two": run_executor(data, str(root / "two"), [
                "--direct_running_mode=multi_processing", "--direct_num_workers=2"])}
    with worker_pool(str(root / "pool.log")) as (port, _):
        made["portable"] = run_executor(data, str(root / "portable"), portable_args(port))
    return root, made


def test_every_runner_writes_the_same_shards_and_counts(runs):
    _, made = runs
    one = outputs(made["one"])
    assert outputs(made["two"]) == one
    assert outputs(made["portable"]) == one
    figures = one[1]
    for step in ("duplicate", "near_duplicate", "filter_word_count", "filter_duplicate_lines",
                 "contaminated"):
        assert figures[f"documents_skipped_{step}"] >= 1, step
    assert figures["documents_repeated"] >= 1 and figures["documents_sampled_out"] >= 1
    assert figures["bytes_read"] == (figures["bytes_packed"] + figures["bytes_quarantined"]
                                     + figures["bytes_separators"] + figures["bytes_duplicate"]
                                     + figures["bytes_sampled_out"])


def test_summary_names_every_step_with_its_count(runs):
    root, made = runs
    home = str(root / "home")
    os.makedirs(home)
    store = connect(os.path.join(home, "metadata.sqlite"), read_only=False)
    _pushed_run(Builder(store, home), "run-1", 1, made["one"].mlmd_artifact, {})
    result = content.summary(Lineage(store), "1")
    figures = properties(made["one"].mlmd_artifact)
    steps = {s["step"]: s["count"] for s in result["steps"]}
    for name, value in figures.items():
        if name.startswith(("documents_skipped_", "files_skipped_")):
            assert steps[name] == value, name
    assert result["decontamination"]["decontamination_eval_sets"][0]["files"]
    text = render.summary_markdown(result)
    for step in ("near_duplicate", "filter_word_count", "filter_duplicate_lines", "contaminated"):
        assert f"documents_skipped_{step}" in text
    assert "eval_set.txt" in text
    assert '- quality_filters: ["word_count", "duplicate_lines"]' in text
    assert ('- quality_filters_by_source: {"a": ["word_count", "duplicate_lines"], '
            '"b": ["word_count"]}') in text
    # The evaluation file is one 20-word text: checked, none too short.
    assert '"eval_texts_too_short": 0' in text and '"texts": 1' in text
    assert "- near_dedup: " in text and '"threshold": 0.7' in text
    assert result["decontamination"]["documents_contaminated_eval_set_0"] == figures[
        "documents_contaminated_eval_set_0"] >= 1
