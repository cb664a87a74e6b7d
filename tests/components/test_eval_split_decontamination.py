"""Decontamination against the eval split of another Examples artifact (`examples:<URI>`) or of
another home's newest Examples (`home:<path>`): the eval shards decode back into exactly the eval
documents (and, with small batches, into pieces of them only), the stage removes a training
document sharing a 13-gram with that eval split and keeps one sharing it with the train split,
a home resolves to its newest live Examples with an eval split, and the fingerprint covers the
artifact's files."""

import json
import os
import random

import pytest

from components import config as config_lib
from components.storage import listing
from components.common.errors import HomeError, MetadataStoreError, NotFoundError
from components.corpus import contamination
from components.text_example_gen import eval_split, shards, transforms
from components.tokenizer.byte_level import ByteTokenizer
from tests.support.data_stage import reader_config, run_stage
from benchmarks.support import single_process

WORDS = ("harbor lantern violet meadow copper falcon granite orchard velvet summit willow ember "
         "thistle canyon marble quartz saffron tundra glacier prairie").split()


def write_corpus(root: str, documents: int = 60, seed: int = 30) -> str:
    """Text files of paragraphs (separator mode), each paragraph a distinct random word run."""
    rng = random.Random(seed)
    os.makedirs(root)
    for f in range(6):
        paragraphs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 70)))
                      + f" p{f}x{k}" for k in range(documents // 6)]
        with open(os.path.join(root, f"part-{f}.txt"), "w", encoding="utf-8") as fh:
            fh.write("\n\n".join(paragraphs) + "\n")
    return root


def data_for(root: str, **extra) -> config_lib.DataConfig:
    return config_lib.DataConfig(input=root, exclude=(), document="separator", seq_len=16,
                                 eval_fraction=0.3, train_shards=2, eval_shards=3,
                                 range_bytes=2000, **extra)


def run_executor(data: config_lib.DataConfig, uri: str):
    """The TextExampleGen executor itself (what a run's data stage does)."""
    from tfx.types import standard_artifacts
    from components.text_example_gen.component import TextExampleGenExecutor
    examples = standard_artifacts.Examples()
    examples.uri = uri
    os.makedirs(uri)
    TextExampleGenExecutor().Do({}, {"examples": [examples]}, {
        "data_config": config_lib.section_json(data), "input_fingerprint": listing.UNRESOLVED})
    return examples


def split_texts(data) -> dict[str, list[bytes]]:
    out = {"train": [], "eval": []}
    for split, document in single_process.read_split_documents(data):
        out[split].append(document.text)
    return out


@pytest.fixture(scope="module")
def other(tmp_path_factory):
    """Another home's Examples: (its URI, its DataConfig, its documents per split)."""
    root = tmp_path_factory.mktemp("other")
    data = data_for(write_corpus(str(root / "corpus")))
    examples = run_executor(data, str(root / "examples"))
    return examples.uri, data, split_texts(data)


def test_eval_shards_decode_into_exactly_the_eval_documents(other):
    uri, _, texts = other
    assert len(texts["eval"]) >= 10
    decoded = list(eval_split.eval_split_texts(uri, "test"))
    assert sorted(decoded) == sorted(texts["eval"])


def test_small_batches_cut_documents_at_batch_boundaries_only(tmp_path, monkeypatch):
    """Batches of 8 windows of 33 ids (a boundary every ~256 bytes of a unit's eval stream,
    across 3 shards): every decoded text is a piece of one eval document (no two joined by
    mistake), some documents come back whole, and the pieces' bytes are the documents' plus at
    most one shared id per cut."""
    data = data_for(write_corpus(str(tmp_path / "corpus")))
    monkeypatch.setattr(shards, "BATCH_SEQUENCES", 8)
    _, files = listing.list_input_files(data.input)
    run_stage(files, str(tmp_path / "out"), config=reader_config(document="separator",
                                                                 range_bytes=2000),
              seq_len=32, eval_fraction=0.3, train_shards=2, eval_shards=3)
    expected = split_texts(data)["eval"]
    tokenizer, paths = ByteTokenizer(), sorted((tmp_path / "out" / "Split-eval").iterdir())
    decoded = [text for path in paths for text in eval_split.windows_to_texts(
        shards.read_windows(str(path)), tokenizer, batch=8)]
    assert all(any(text in document for document in expected) for text in decoded)
    whole = set(decoded) & set(expected)
    assert len(decoded) > len(expected) and len(whole) >= 2
    # Cut at batch boundaries only: no more cuts than batches (windows within one are joined).
    cuts = len(decoded) - len(expected)
    windows = sum(1 for path in paths for _ in shards.read_windows(str(path)))
    assert cuts <= -(-windows // 8) < windows - len(expected)
    assert sum(map(len, expected)) <= sum(map(len, decoded)) <= sum(map(len, expected)) + cuts


def test_windows_join_within_a_batch_only():
    """Batches of 3 windows of 4 ids. A padded window ends a unit's stream (the next window
    starts a batch); after 3 windows a batch ends, and the next window starts a new run even
    when its first id repeats the last one (another batch's window, by chance)."""
    import numpy as np
    from components.tokenizer.byte_level import BOS_ID, EOS_ID, PAD_ID

    def window(*items):
        return np.array([i if isinstance(i, int) else ord(i) for i in items])
    windows = [window(BOS_ID, "a", "b", "c"), window("c", EOS_ID, PAD_ID, PAD_ID),
               window(BOS_ID, "d", "e", "f"), window("f", "g", "h", "i"),
               window("i", "j", "k", "l"), window("l", "m", "n", EOS_ID)]
    texts = list(eval_split.windows_to_texts(windows, ByteTokenizer(), batch=3))
    assert texts == [b"abc", b"defghijkl", b"lmn"]


def planted(texts: list[bytes]) -> str:
    """A training paragraph holding 13 consecutive words of the longest of texts."""
    words = max(texts, key=len).decode().split()
    return " ".join(["unrelated"] * 5 + words[3:16] + ["words"] * 5)


def test_stage_removes_documents_sharing_an_ngram_with_the_other_eval_split(other, tmp_path):
    uri, _, texts = other
    rng = random.Random(1)
    (tmp_path / "corpus").mkdir()
    ours = [planted(texts["eval"]), planted(texts["train"])] + [
        " ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(30)) + f" n{k}"
        for k in range(20)]
    (tmp_path / "corpus" / "ours.txt").write_text("\n\n".join(ours) + "\n")
    entry = config_lib.EXAMPLES_PREFIX + uri
    data = data_for(str(tmp_path / "corpus"), decontaminate=config_lib.DecontaminationConfig(
        eval_files=(entry,)))
    made = run_executor(data, str(tmp_path / "examples"))
    counters = json.load(open(os.path.join(made.uri, "counters.json")))
    assert counters["documents_skipped_contaminated"] == 1
    assert counters[f"{transforms.EVAL_SET_COUNTER}0"] == 1
    manifest = [json.loads(line) for line in open(os.path.join(made.uri,
                                                               transforms.QUARANTINE_MANIFEST))]
    assert [m["path"] for m in manifest] == ["ours.txt@0"]
    assert manifest[0]["detail"] == f"shares a 13-gram with {entry}"
    sets = json.loads(counters["decontamination_eval_sets"])
    assert sets == [{"name": entry, "files": [eval_split.eval_set_path(made.uri, 0)],
                     "texts": len(texts["eval"]), "too_short": 0}]
    written = list(contamination.eval_texts(sets[0]["files"][0]))
    assert sorted(written) == sorted(texts["eval"])


def _home_with_examples(root, builder_runs: list[tuple[str, bool, bool]]) -> str:
    """A home whose store holds one Examples artifact per (run, live, with an eval split)."""
    from ml_metadata.proto import metadata_store_pb2 as pb
    from benchmarks.support.lineage_store import Builder, _context
    from benchmarks.support.mlmd import connect
    home = str(root)
    os.makedirs(home, exist_ok=True)
    store = connect(os.path.join(home, "metadata.sqlite"), read_only=False)
    b = Builder(store, home)
    for run, live, with_eval in builder_runs:
        artifact = b.artifact("Examples", "examples", {}, run)
        if not live:
            artifact.state = pb.Artifact.DELETED
        if with_eval:
            os.makedirs(shards.split_dir(artifact.uri, "eval"))
            open(os.path.join(shards.split_dir(artifact.uri, "eval"), "data.gz"), "wb").close()
        b.execution(_context(store, b.types, "pipeline_run", run), "TextExampleGen",
                    pb.Execution.COMPLETE, {}, {"examples": artifact})
    return home


def test_a_home_resolves_to_its_newest_live_examples_with_an_eval_split(tmp_path):
    from runners.local.eval_homes import resolve_eval_homes
    home = _home_with_examples(tmp_path / "home", [("run-1", True, True), ("run-2", True, True),
                                                   ("run-3", False, True), ("run-4", True, False)])
    config = config_lib.build_config("tiny", overrides=[
        f"data.decontaminate.eval_files=[home:{home}, /data/quiz.jsonl]", "eval.sets=[]"])
    resolved = resolve_eval_homes(config)
    assert resolved.data.decontaminate.eval_files == (
        config_lib.EXAMPLES_PREFIX + os.path.join(home, "pipelines", "run-2", "examples"),
        "/data/quiz.jsonl")
    assert resolve_eval_homes(resolved) == resolved            # nothing left to resolve
    empty = _home_with_examples(tmp_path / "empty", [("run-1", True, False)])
    for target, error, message in (
            (str(tmp_path / "nowhere"), HomeError, "is not a directory"),
            (str(tmp_path), MetadataStoreError, "no metadata database at"),
            (empty, NotFoundError, "holds no Examples with an eval split")):
        with pytest.raises(error, match=r"data.decontaminate.eval_files\[0\] \(home:.*" + message):
            resolve_eval_homes(config_lib.build_config("tiny", overrides=[
                f"data.decontaminate.eval_files=[home:{target}]"]))


def test_fingerprint_covers_the_other_examples_and_spellings_are_checked(other, tmp_path):
    uri, data, _ = other
    entry = config_lib.EXAMPLES_PREFIX + uri
    with_set = config_lib.merge(data, {"decontaminate": {"eval_files": [entry]}})
    files = listing.eval_set_files(with_set)
    assert any("Split-eval" in relative for relative, _ in files)
    assert all(relative.startswith(f"eval-set {entry}: ") for relative, _ in files)
    before = listing.fingerprint_input(with_set)
    assert before != listing.fingerprint_input(data)
    with pytest.raises(ValueError, match="resolve it"):
        listing.eval_set_files(config_lib.merge(data, {"decontaminate": {
            "eval_files": ["home:/somewhere"]}}))
    with pytest.raises(ValueError, match="'home:/somewhere' was not resolved"):
        contamination.resolve_eval_sets(("home:/somewhere",))
    for empty in ("home:", "examples:"):
        with pytest.raises(config_lib.ConfigError, match="data.decontaminate.eval_files: an entry "
                                                         "is empty"):
            config_lib.build_config("tiny", overrides=[
                f"data.decontaminate.eval_files=['{empty}']"])
    with pytest.raises(FileNotFoundError, match=r"eval_files\[0\].*no eval shards under"):
        eval_split.write_eval_sets((config_lib.EXAMPLES_PREFIX + str(tmp_path),), str(tmp_path))


def test_run_and_compile_resolve_home_entries_first(tmp_path, capsys):
    """`bigtrain run` and `bigtrain compile` resolve a home: entry before anything else: a home
    that is not there is their named error (exit 6), before the run's lock or the compiler."""
    from components.common.errors import EXIT_HOME
    from runners.cli import app as cli
    from runners.local.run import run_command
    missing = str(tmp_path / "no-such-home")
    overrides = [f"paths.home={tmp_path / 'ours'}",
                 f"data.decontaminate.eval_files=[home:{missing}]"]
    with pytest.raises(HomeError, match=r"eval_files\[0\] \(home:.*no-such-home\)"):
        run_command(config_lib.build_config("tiny", overrides=overrides))
    assert not (tmp_path / "ours").exists()
    code = cli.main(["compile", "kubeflow", "--out", str(tmp_path / "spec.json")]
                    + [arg for item in overrides for arg in ("--set", item)])
    assert code == EXIT_HOME and "no-such-home" in capsys.readouterr().err
    assert not (tmp_path / "spec.json").exists()
