"""Issue 30's done-when as a whole `bigtrain run`: a two-source mixture (text and JSONL, weights
2.5 and 0.3, the second with its own filter list) with exact then near dedup, two quality
filters and decontamination, through every stage to a pushed version; then `bigtrain lineage
summary <version>` names every cleaning step with the count the data stage recorded, and
`bigtrain lineage trace --down <file>` answers that the version was trained on each source's
files. (tests/pipeline/test_cleaning_mixture.py runs the same data stage on the three runners.)"""

import dataclasses
import os

import pytest

from components import config as config_lib
from components.storage import listing
from pipeline.lineage.store import properties
from runners.cli import app as cli
from tests.conftest import PLAIN_STEP
from tests.support.mixture_sources import make_sources
from tests.support.pipeline_run import lineage_json, lineage_text
from tests.support.mixture_sources import cleaning_data, plant

pytestmark = pytest.mark.slow

STEPS = ("documents_skipped_duplicate", "documents_skipped_near_duplicate",
         "documents_skipped_filter_word_count", "documents_skipped_filter_duplicate_lines",
         "documents_skipped_contaminated")


@pytest.fixture(scope="module")
def mixture_run(tmp_path_factory, session_capsys):
    root = tmp_path_factory.mktemp("mixture-run")
    corpus = make_sources(str(root / "corpus"))
    data = cleaning_data(corpus, plant(corpus, str(root)))
    # One block: what is checked here is the data stage's mixture and its lineage to the push.
    config = config_lib.build_config("tiny", overrides=[
        "model.n_layer=1", "train.train_steps=30", "train.warmup_steps=5", "train.eval_batches=2",
        "eval.max_batches=2", "eval.variant_batches=1", "eval.max_loss=10.0",
        "export.quantize=[]", "eval.sets=[]", "runtime.strategy=one_device", PLAIN_STEP])
    config = dataclasses.replace(config, data=dataclasses.replace(data, seq_len=64))
    config_file = config_lib.save_config(config, str(root / "config"))
    home = str(root / "home")
    code = cli.main(["run", "--home", home, "--config", config_file])
    out = session_capsys.readouterr().out
    return home, corpus, code, out


def pushed_version(home) -> str:
    """The newest version folder (the serving folder also holds models.config and the batching
    parameters)."""
    return max((n for n in os.listdir(os.path.join(home, "serving", "gpt")) if n.isdigit()), key=int)


def examples_figures(home) -> dict:
    from benchmarks.support.mlmd import connect
    store = connect(os.path.join(home, "metadata.sqlite"))
    (examples,) = [a for a in store.get_artifacts_by_type("Examples")]
    return properties(examples)


def test_the_mixture_runs_to_a_pushed_version(mixture_run):
    home, _, code, out = mixture_run
    assert code == 0, out[-3000:]
    assert "pushed" in out and os.listdir(os.path.join(home, "serving", "gpt"))


def test_the_summary_names_every_step_with_the_recorded_count(mixture_run, session_capsys):
    home, _, code, _ = mixture_run
    assert code == 0
    version = pushed_version(home)
    figures = examples_figures(home)
    summary = lineage_json(session_capsys, home, "summary", version)
    steps = {s["step"]: s["count"] for s in summary["steps"]}
    for step in STEPS:
        assert figures[step] >= 1, step
        assert steps[step] == figures[step], step
    assert [s["name"] for s in summary["sources"]] == ["a", "b"]
    text = lineage_text(session_capsys, home, "summary", version)
    rows = text.splitlines()     # the Markdown table: | step (setting) | count |
    for step in STEPS:
        assert any(row.startswith(f"| {step}") and row.endswith(f" | {figures[step]} |")
                   for row in rows), step
    assert "eval_set.txt" in text


def test_trace_down_finds_the_version_from_each_source(mixture_run, session_capsys):
    home, corpus, code, _ = mixture_run
    assert code == 0
    version = pushed_version(home)
    for source in ("a", "b"):
        _, files = listing.list_input_files(corpus[source])
        kept = next(path for relative, path in files if not relative.startswith(("empty", "near")))
        out = lineage_json(session_capsys, home, "trace", "--down", kept)
        assert version in [str(p["pushed_version"]) for p in out["pushed_versions"]], (source, out)
