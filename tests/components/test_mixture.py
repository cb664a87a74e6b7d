"""Mixtures (data.sources): the weight rule against a reference written out apart
(tests/support/mixture_sources.py reference_counts), per-source counters per split, determinism,
the one-source shorthand unchanged, and the config errors."""

import hashlib

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline

from components import config as config_lib
from components.storage import listing
from components.corpus import readers
from components.text_example_gen import mixture, transforms
from components.text_example_gen.component import check_accounting, stage_counters
from tests.support.mixture_sources import PARAMS, make_sources, reference_counts, shard_digests


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_sources(str(tmp_path_factory.mktemp("mixture")))


BEAM_ARGS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


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
