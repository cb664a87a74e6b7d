"""`bigtrain lineage summary` and `lineage trace --down FILE`, on the properties and listing the
real data stage records: its executor runs a two-source mixture here (no pipeline), and a small
MLMD store (benchmarks/support/lineage_store.py's Builder) wires its Examples into two trained and
pushed models, the second warm-started from the first and trained on other Examples."""

import json
import os

import pytest

from components import config as config_lib
from components.storage import fs, listing
from components.common.errors import NotFoundError
from pipeline.lineage import content, render
from pipeline.lineage.store import Lineage, properties
from runners.cli import app as cli
from tests.support.mixture_sources import make_sources, reference_counts
from benchmarks.support.lineage_store import Builder
from benchmarks.support.mlmd import connect
from tests.support.mixture_sources import WEIGHTS, _pushed_run

# Source b's own filter list is [word_count]: its records of fewer words are skipped (a has none).
MIN_WORDS = 20


def mixture_data(corpus) -> config_lib.DataConfig:
    return config_lib.DataConfig(
        sources=(config_lib.SourceConfig(name="a", input=corpus["a"], weight=WEIGHTS["a"]),
                 config_lib.SourceConfig(name="b", input=corpus["b"], format="jsonl",
                                         weight=WEIGHTS["b"], filters=("word_count",))),
        filters=config_lib.QualityFilterConfig(min_words=MIN_WORDS),
        seq_len=64, eval_fraction=0.25, train_shards=3, eval_shards=2)


def run_data_stage(corpus, uri: str):
    """The TextExampleGen executor itself on the mixture; returns its Examples artifact."""
    from tfx.types import standard_artifacts
    from components.text_example_gen.component import TextExampleGenExecutor
    examples = standard_artifacts.Examples()
    examples.uri = uri
    os.makedirs(uri)
    TextExampleGenExecutor().Do({}, {"examples": [examples]}, {
        "data_config": config_lib.section_json(mixture_data(corpus)),
        "input_fingerprint": listing.UNRESOLVED})
    return examples


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("content")
    corpus = make_sources(str(root / "corpus"))
    examples = run_data_stage(corpus, str(root / "examples"))
    other = root / "other_examples"
    other.mkdir()
    (other / "extra.txt").write_text("only in the second run\n")
    other_listing = str(other / listing.LISTING_FILE)
    fs.write_text(other_listing, "".join(json.dumps(r) + "\n" for r in listing.listing_records(
        "default", [("extra.txt", str(other / "extra.txt"))])))
    home = str(root / "home")
    os.makedirs(home)
    store = connect(os.path.join(home, "metadata.sqlite"), read_only=False)
    b = Builder(store, home)
    first = _pushed_run(b, "run-1", 1, examples.mlmd_artifact, {"decontaminated_documents": 3,
                                                                 "decontamination_sets": '["wiki"]'})
    second = b.artifact("Examples", "examples", {"input_listing": other_listing, "sources": json.dumps(
        [{"name": "default", "root": str(other), "format": "text"}])}, "run-2")
    _pushed_run(b, "run-2", 2, second, {}, base_model=first)
    return {"corpus": corpus, "examples": examples, "home": home, "lin": Lineage(store),
            "extra": str(other / "extra.txt")}


def test_data_stage_records_sources_listing_and_counters(world):
    props = properties(world["examples"].mlmd_artifact)
    expected = reference_counts(world["corpus"], WEIGHTS, {"b": MIN_WORDS})
    assert props["documents_skipped_filter_word_count"] >= 1
    sources = {s["name"]: s for s in json.loads(props["sources"])}
    for name in ("a", "b"):
        for measure in ("documents", "bytes", "tokens", "unique", "sampled_out"):
            assert sources[name][measure] == expected[name][measure], (name, measure)
            for split in ("train", "eval"):
                assert props[f"source_{name}_{measure}_{split}"] == expected[name][measure][split]
        files = listing.list_input_files(world["corpus"][name])[1]
        assert sources[name]["files"] == len(files)
        assert sources[name]["bytes_listed"] == sum(os.path.getsize(p) for _, p in files)
        mtimes = [os.stat(p).st_mtime for _, p in files]
        assert (sources[name]["first_mtime"], sources[name]["last_mtime"]) == (min(mtimes), max(mtimes))
    assert sources["b"]["filters"] == ["word_count"] and sources["a"]["filters"] is None
    for name in ("a", "b"):  # packed train copies / distinct train documents
        assert sources[name]["epochs"] == round(expected[name]["documents"]["train"] / (
            expected[name]["unique"]["train"] + expected[name]["sampled_out"]["train"]), 6)
    train_tokens = sum(expected[name]["tokens"]["train"] for name in ("a", "b"))
    for name in ("a", "b"):  # the realized share of the train tokens
        assert sources[name]["share"] == round(expected[name]["tokens"]["train"] / train_tokens, 6)
    records = list(listing.read_listing(fs.read_text(props["input_listing"])))
    assert sorted(r["path"] for r in records) == sorted(
        p for name in ("a", "b") for _, p in listing.list_input_files(world["corpus"][name])[1])
    on_disk = json.load(open(os.path.join(world["examples"].uri, "counters.json")))
    assert on_disk["sources"] == json.loads(props["sources"])


def test_summary_of_a_pushed_version(world):
    result = content.summary(world["lin"], "1")
    assert (result["pushed_version"], result["run_id"]) == ("1", "run-1")
    assert [s["name"] for s in result["sources"]] == ["a", "b"]
    assert result["formats"] == ["jsonl", "text"]
    steps = {s["step"]: s["count"] for s in result["steps"]}
    props = properties(world["examples"].mlmd_artifact)
    # Every removal counter the stage recorded, read by name (a new filter's too).
    assert steps == {k: v for k, v in props.items() if k.startswith(("documents_skipped_",
                     "files_skipped_")) or k in ("documents_sampled_out", "documents_repeated")}
    assert steps["documents_skipped_duplicate"] == 2 and steps["documents_skipped_invalid_json"] == 1
    assert result["decontamination"] == {"decontaminated_documents": 3,
                                         "decontamination_sets": ["wiki"]}
    assert result["tokenizer"]["kind"] == "bytes"
    text = render.summary_markdown(result)
    for line in ("# Training content of pushed version 1", "| a | `", "| documents_skipped_duplicate "
                 "(data.dedup=exact) | 2 |", "- decontaminated_documents: 3"):
        assert line in text
    second = content.summary(world["lin"], os.path.join(world["home"], "serving", "gpt", "2"))
    assert second["fine_tuned_from"] == result["model_id"]


def test_trace_down_from_an_input_file(world):
    a_file = listing.list_input_files(world["corpus"]["a"])[1][0][1]
    result = content.trace_down(world["lin"], a_file)
    # Version 1 read it; version 2 was warm-started from version 1's model.
    assert [p["pushed_version"] for p in result["pushed_versions"]] == ["1", "2"]
    assert [e["source"] for e in result["examples"]] == ["a"]
    only_second = content.trace_down(world["lin"], world["extra"])
    assert [p["pushed_version"] for p in only_second["pushed_versions"]] == ["2"]
    with pytest.raises(NotFoundError, match="no recorded input listing holds it"):
        content.trace_down(world["lin"], os.path.join(world["corpus"]["a"], "never-listed.txt"))
    # a file name that is not UTF-8 (surrogate escapes): named, not a UnicodeEncodeError (issue 41)
    with pytest.raises(NotFoundError, match="no recorded input listing holds it"):
        content.trace_down(world["lin"], os.fsdecode(b"/tmp/a\xffb.py"))


def test_cli_summary_and_trace(world, capsys):
    capsys.readouterr()
    assert cli.main(["lineage", "summary", "1", "--home", world["home"]]) == 0
    assert "## Sources" in capsys.readouterr().out
    assert cli.main(["lineage", "summary", "1", "--home", world["home"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pushed_version"] == "1"
    assert cli.main(["lineage", "trace", "--down", world["extra"], "--home", world["home"]]) == 0
    out = capsys.readouterr().out
    assert "pushed versions trained on it:" in out and "run-2" in out


def test_run_report_has_a_row_per_source(world):
    from pipeline.lineage.report_data import sources_section
    props = properties(world["examples"].mlmd_artifact)
    rows = {line.split()[0]: line.split() for line in sources_section(props)[2:]}
    for name in ("a", "b"):
        documents = f"{props[f'source_{name}_documents_train']}/{props[f'source_{name}_documents_eval']}"
        tokens = f"{props[f'source_{name}_tokens_train']}/{props[f'source_{name}_tokens_eval']}"
        row = "".join(rows[name][4:])
        assert documents in row and row.endswith(tokens), rows[name]
        assert float(rows[name][1]) == WEIGHTS[name]
        share = props[f"source_{name}_tokens_train"] / sum(
            props[f"source_{s}_tokens_train"] for s in ("a", "b"))
        assert rows[name][3] == f"{share:.1%}"


def test_cleaning_settings_read_from_the_data_section_are_already_parsed():
    """An Examples made before the cleaning properties existed (the e2e chain's default run):
    the settings come from the data section, whose JSON is already parsed into dicts; the old
    code passed those to json.loads (TypeError)."""
    near = {"bands": 0, "ngram": 5, "num_perm": 128, "seed": 1}
    result = content.data_content({"documents_skipped_duplicate": 2},
                                  {"dedup": "exact", "near_dedup": near})
    assert result["cleaning"] == {"dedup": "exact", "near_dedup": near}
    assert result["steps"] == [{"step": "documents_skipped_duplicate", "count": 2, "dedup": "exact"}]
