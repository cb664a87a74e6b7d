"""Mixtures (data.sources): the weight rule against a reference written out here, per-source
counters per split, determinism, the one-source shorthand unchanged, and the config errors."""

import glob
import gzip
import hashlib
import json
import math
import os
import random

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline

from components import config as config_lib
from components.common import listing
from components.corpus import readers
from components.text_example_gen import mixture, transforms
from components.text_example_gen.component import check_accounting, stage_counters

BEAM_ARGS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
         "sigma tau upsilon phi chi psi omega river stone cloud lamp paper window").split()
PARAMS = dict(seq_len=64, eval_fraction=0.25, split_salt="", train_shards=3, eval_shards=2)


def _paragraph(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(15, 60)))


def make_sources(root: str) -> dict[str, str]:
    """Source `a`: 30 text files of three paragraphs, one exact copy and one empty file; source
    `b`: two JSONL files (70 records, one invalid line, one record repeating a file of `a`).
    Seeded: the same bytes on every machine. Returns {source: its directory}."""
    rng = random.Random(30)
    a, b = os.path.join(root, "a"), os.path.join(root, "b")
    os.makedirs(a)
    os.makedirs(b)
    texts = []
    for i in range(30):
        texts.append("\n\n".join(_paragraph(rng) for _ in range(3)) + "\n")
        with open(os.path.join(a, f"doc_{i:02d}.txt"), "w", encoding="utf-8") as fh:
            fh.write(texts[-1])
    with open(os.path.join(a, "doc_99_copy.txt"), "w", encoding="utf-8") as fh:
        fh.write(texts[3])
    open(os.path.join(a, "empty.txt"), "w").close()
    for part, count in (("part-0.jsonl", 40), ("part-1.jsonl", 30)):
        with open(os.path.join(b, part), "w", encoding="utf-8") as fh:
            for j in range(count):
                fh.write(json.dumps({"text": _paragraph(rng), "id": j}) + "\n")
            if part == "part-0.jsonl":
                fh.write("{not json\n")
                fh.write(json.dumps({"text": texts[5]}) + "\n")
    return {"a": a, "b": b}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_sources(str(tmp_path_factory.mktemp("mixture")))


def reader(format="text", document="file"):
    return readers.ReaderConfig(format, document, b"\n\n", "text", 10**7, 10**7)


def run_stage(out_dir, files=(), config=None, sources=None, beam_args=BEAM_ARGS, **overrides):
    p = TestPipeline(options=PipelineOptions(beam_args), blocking=True)
    _ = p | transforms.TextToTFRecordShards(list(files), out_dir, reader_config=config or reader(),
                                            sources=sources, **dict(PARAMS, **overrides))
    result = p.run()
    result.wait_until_finish()
    return stage_counters(out_dir, tuple(spec.name for spec, _ in sources or ()))


def two_sources(corpus, weight_a=2.5, weight_b=0.3):
    return [(mixture.SourceSpec("a", reader(), weight_a), listing.list_input_files(corpus["a"])[1]),
            (mixture.SourceSpec("b", reader("jsonl", "record"), weight_b),
             listing.list_input_files(corpus["b"])[1])]


# ----------------------------------------------------------------------------------------------
# The reference: the rule of mixture.py written out again, over documents read here.


def documents_of(source: str, directory: str):
    """(text bytes, input bytes) of every well-formed document, in reading order."""
    for path in sorted(glob.glob(os.path.join(directory, "*"))):
        raw = open(path, "rb").read()
        if source == "a":
            if raw:
                yield raw, len(raw)
            continue
        for line in raw.split(b"\n"):
            try:
                yield json.loads(line)["text"].encode("utf-8"), len(line)
            except ValueError:
                continue


def reference_counts(corpus, weights: dict[str, float], min_words: dict[str, int] | None = None
                     ) -> dict[str, dict]:
    """min_words: {source: the word_count filter's minimum} for sources screened by it (after
    exact dedup, before the split and the weight)."""
    seen, table = set(), {}
    for source in ("a", "b"):
        row = table[source] = {m: {"train": 0, "eval": 0} for m in ("documents", "bytes", "tokens",
                                                                   "unique", "sampled_out")}
        for text, size in documents_of(source, corpus[source]):
            key = hashlib.sha256(text.replace(b"\r\n", b"\n").strip()).hexdigest()
            if key in seen:
                continue                                  # exact dedup, across sources too
            seen.add(key)
            if len(text.split()) < (min_words or {}).get(source, 0):
                continue                                  # filter word_count
            u = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2.0 ** 64
            split = "eval" if u < PARAMS["eval_fraction"] else "train"
            whole = math.floor(weights[source])
            pick = int.from_bytes(hashlib.sha256(f"{key}\0{source}\0{whole}".encode()).digest()[:8],
                                  "big") / 2.0 ** 64
            copies = whole + (pick < weights[source] - whole)
            copies = min(copies, 1) if split == "eval" else copies
            if not copies:
                row["sampled_out"][split] += 1
                continue
            for measure, value in (("documents", copies), ("bytes", copies * size),
                                   ("tokens", copies * len(text)), ("unique", 1)):
                row[measure][split] += value
    return table


def test_two_source_mixture_counts_match_the_rule(corpus, tmp_path):
    counters = run_stage(str(tmp_path / "out"), sources=two_sources(corpus))
    files = sum(len(listing.list_input_files(d)[1]) for d in corpus.values())
    check_accounting(counters, files, "manifest")
    got = mixture.source_table(counters)
    expected = reference_counts(corpus, {"a": 2.5, "b": 0.3})
    for source in ("a", "b"):
        assert {k: v for k, v in got[source].items() if k not in ("epochs", "share")} == expected[
            source], source
    # The weights did something: a repeated (2.5 in expectation), b sampled (0.3), eval never
    # repeated (documents == unique there).
    assert 2.0 < got["a"]["epochs"] <= 3.0 and 0.1 < got["b"]["epochs"] < 0.5
    assert sum(expected["b"]["sampled_out"].values()) > 0
    # The weight is epochs of its own source; the share is what the source became of the train
    # tokens: a (2.5 epochs of 30 documents) far outweighs b (0.3 of 70 shorter records).
    assert got["a"]["share"] + got["b"]["share"] == pytest.approx(1.0, abs=1e-5)
    assert got["a"]["share"] == round(expected["a"]["tokens"]["train"] / (
        expected["a"]["tokens"]["train"] + expected["b"]["tokens"]["train"]), 6) > 0.8
    assert sum(expected["a"]["sampled_out"].values()) == 0
    for source in ("a", "b"):
        assert got[source]["documents"]["eval"] == got[source]["unique"]["eval"]
    assert counters["documents_repeated"] == sum(
        got[s]["documents"]["train"] - got[s]["unique"]["train"] for s in got)
    assert counters["documents_sampled_out"] == sum(expected["b"]["sampled_out"].values())
    assert counters["documents_skipped_duplicate"] == 2          # the copied file, the JSONL copy
    total_tokens = sum(got[s]["tokens"][split] for s in got for split in ("train", "eval"))
    # Every packed id is a text token or a BOS/EOS around a document copy (windows overlap by
    # one id, so real ids in windows >= the stream).
    assert counters["tokens_real"] >= total_tokens + 2 * sum(
        got[s]["documents"][split] for s in got for split in ("train", "eval"))


def shard_digests(out_dir: str) -> dict[str, str]:
    """sha256 of every output file's decompressed bytes (zlib versions may deflate differently)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(out_dir, "**", "*"), recursive=True)):
        if os.path.isfile(path):
            data = open(path, "rb").read()
            data = gzip.decompress(data) if path.endswith(".gz") else data
            out[os.path.relpath(path, out_dir)] = hashlib.sha256(data).hexdigest()
    return out


def test_mixture_is_deterministic(corpus, tmp_path):
    first = run_stage(str(tmp_path / "one"), sources=two_sources(corpus))
    second = run_stage(str(tmp_path / "two"), sources=two_sources(corpus))
    assert first == second
    assert shard_digests(str(tmp_path / "one")) == shard_digests(str(tmp_path / "two"))


# The one-source shorthand's shards as the data stage wrote them before mixtures existed
# (computed with that code on make_sources' source `a`, document=separator, range_bytes=2000):
# sha256 of each file's decompressed bytes. The train shards' since issue 58 (the train split in
# order.py's random order, equal shards; the eval shards and manifest unchanged).
BEFORE_MIXTURES = {
    "Split-eval/data_tfrecord-00000-of-00002.gz":
        "01acf755b6e808b851b04cb255c06847dd49f631de294f01dedbbe352f3b4e42",
    "Split-eval/data_tfrecord-00001-of-00002.gz":
        "5a7a1726d235035e7c1a2323f2b968411316e30e61f88684964f75ee675d4814",
    "Split-train/data_tfrecord-00000-of-00003.gz":
        "7b4c78188c5d9fbf17bda9e1360470f68c0a57a9ebf0afe74d7534f370b18a1e",
    "Split-train/data_tfrecord-00001-of-00003.gz":
        "f886d2208812725392026989aa1214f0f0553369f971e1b3fad88d7010cbc17c",
    "Split-train/data_tfrecord-00002-of-00003.gz":
        "06c6670420b7565ff99d94131b790f5d20a591ed030c5e7c392aa6e2076ab1cb",
    "quarantine.jsonl": hashlib.sha256(b"").hexdigest(),
}


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
def test_one_source_shorthand_writes_the_shards_of_before(corpus, tmp_path):
    config = readers.ReaderConfig("text", "separator", b"\n\n", "text", 10**7, 2000)
    _, files = listing.list_input_files(corpus["a"])
    plain = run_stage(str(tmp_path / "plain"), files, config)
    named = run_stage(str(tmp_path / "named"), config=config, sources=[
        (mixture.SourceSpec(config_lib.DEFAULT_SOURCE, config, 1.0), files)])
    assert shard_digests(str(tmp_path / "plain")) == BEFORE_MIXTURES
    assert shard_digests(str(tmp_path / "named")) == BEFORE_MIXTURES
    assert {k: v for k, v in named.items() if k in plain} == plain
    assert plain["documents_repeated"] == plain["documents_sampled_out"] == 0


# ----------------------------------------------------------------------------------------------
# Config: data.sources in YAML and --set, and its errors.


def test_sources_from_yaml_and_the_shorthand(tmp_path):
    path = tmp_path / "mix.yaml"
    path.write_text("data:\n  sources:\n    - {name: web, input: /d/web, weight: 2.5}\n"
                    "    - name: code\n      input: /d/code/**/*.py\n      weight: 0.3\n"
                    "      filters: [word_count]\n")
    data = config_lib.build_config("tiny", str(path)).data
    assert [(s.name, s.weight, s.filters) for s in data.mixture()] == [
        ("web", 2.5, None), ("code", 0.3, ("word_count",))]
    assert config_lib.from_dict(config_lib.DataConfig, config_lib.to_dict(data)) == data
    shorthand = config_lib.DataConfig(input="/d/x", format="jsonl").mixture()
    assert [(s.name, s.input, s.format, s.weight, s.filters) for s in shorthand] == [
        ("default", "/d/x", "jsonl", 1.0, None)]
    # The stage's cache key (section_json) changes with a source's weight.
    assert config_lib.section_json(config_lib.merge(data, {"sources": [
        {"name": "web", "input": "/d/web", "weight": 2.0}]})) != config_lib.section_json(data)


@pytest.mark.parametrize("sources, message", [
    ("[{name: a, input: x}, {name: a, input: y}]", r"data.sources\[1\] \(a\).name: 'a' names two"),
    ("[{name: a, input: x, weight: 0}]", r"data.sources\[0\] \(a\).weight: must be a finite"),
    ("[{name: a, input: x, weight: -1}]", r"\(a\).weight: must be a finite number > 0"),
    # Non-finite numbers are refused by the loader's check of every number, before the rules.
    ("[{name: a, input: x, weight: .inf}]", r"data.sources\[0\].weight: must be a finite number"),
    ("[{name: a, input: x, weight: .nan}]", r"data.sources\[0\].weight: must be a finite number"),
    ("[{name: a, input: x, wieght: 2}]", r"unknown config key 'data.sources\[0\].wieght' \(did you"),
    ("[{name: 'a b', input: x}]", r"data.sources\[0\].name: 'a b' is not a source name"),
    ("[{name: a}]", r"data.sources\[0\] \(a\).input: must name"),
    ("{name: a, input: x}", r"data.sources: expected a list of mappings"),
    ("[{name: a, input: x, format: tfrecord}]", r"\(a\).format: 'tfrecord' is not one of"),
    ("[{name: a, input: x, filters: [word_count, bogus]}]",
     r"data.sources\[0\] \(a\).filters: unknown filter 'bogus'; known: word_count, "
     r"mean_word_length, .*, code$"),
    ("[{name: a, input: x, filters: word_count}]", None),
])
def test_sources_config_errors_name_the_key(sources, message):
    if message is None:  # one filter name as a string is a list of one
        data = config_lib.build_config("tiny", overrides=[f"data.sources={sources}"]).data
        assert data.sources[0].filters == ("word_count",)
        return
    with pytest.raises(config_lib.ConfigError, match=message):
        config_lib.build_config("tiny", overrides=[f"data.sources={sources}"])


def test_fingerprint_covers_every_source(corpus):
    one = config_lib.DataConfig(sources=(config_lib.SourceConfig(name="a", input=corpus["a"]),))
    both = config_lib.DataConfig(sources=one.sources + (
        config_lib.SourceConfig(name="b", input=corpus["b"], format="jsonl"),))
    shorthand = config_lib.DataConfig(input=corpus["a"], exclude=())
    assert listing.fingerprint_input(shorthand) == listing.input_fingerprint(
        listing.list_input_files(corpus["a"])[1])        # unchanged: caches stay valid
    assert len({listing.fingerprint_input(d) for d in (one, both, shorthand)}) == 3
    assert listing.input_signature(one, "f") != listing.input_signature(both, "f")


@pytest.mark.slow
def test_mixture_shards_do_not_depend_on_the_runner(corpus, tmp_path):
    """The mixture's copies and samples depend on content and source only: two DirectRunner
    worker processes, and the PortableRunner with SDK workers in separate processes (the Fn API
    path of Flink, Spark and Dataflow), write the shards and counters one process writes."""
    from tests.support.beam_worker_pool import portable_args, worker_pool
    one = run_stage(str(tmp_path / "one"), sources=two_sources(corpus))
    two = run_stage(str(tmp_path / "two"), sources=two_sources(corpus), beam_args=[
        "--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    with worker_pool(str(tmp_path / "pool.log")) as (port, _):
        portable = run_stage(str(tmp_path / "portable"), sources=two_sources(corpus),
                             beam_args=portable_args(port))
    assert one == two == portable
    for other in ("two", "portable"):
        assert shard_digests(str(tmp_path / other)) == shard_digests(str(tmp_path / "one")), other
