"""Quality filters (data.filters): one hand-made failing document per filter (and a passing
one), the first failing filter in QUALITY_FILTERS order, config errors, and the stage counting
and listing each skip by filter name."""

import json

import pytest

from components import config as config_lib
from components.config import QUALITY_FILTERS, QualityFilterConfig
from components.corpus import documents as docs
from components.corpus import quality
from components.corpus.screen import DocumentScreen
from components.text_example_gen import transforms
from components.text_example_gen.component import check_accounting
from tests.support.data_stage import reader_config, run_stage

DEFAULTS = QualityFilterConfig()
PROSE = ("The committee met on Tuesday to review the budget for the coming year, and members "
         "agreed that the library should receive additional funding for its evening programs. "
         "Several residents spoke in favour of longer opening hours, while others asked about "
         "the cost of new books and the repair of the roof, which has leaked since the storm "
         "last spring. A final decision is expected next month after the public hearing.")
CODE = "def area(width, height):\n    return width * height\n\n\nprint(area(3, 4))\n"

# One document failing each filter (with the default thresholds) and no filter before it in
# QUALITY_FILTERS order (a word-count failure is short, so the others are long enough).
FAILING = {
    "word_count": "too short to be a real document",
    "mean_word_length": " ".join(["a b c d e f g h i j"] * 8),
    "symbol_ratio": PROSE + " #tag" * 12,
    "non_alpha_words": PROSE + " 12 34 56 78 90" * 5,
    "duplicate_lines": PROSE + "\n" + "\n".join(["Click here to subscribe now"] * 8),
    "top_ngram": " ".join(["buy now"] * 20) + " " + PROSE,
    "duplicate_ngrams": PROSE + " " + PROSE,
    "code": "x = [" + ", ".join(str(i) for i in range(400)) + "]\n",
}


def test_every_filter_has_its_check():
    assert tuple(quality.CHECKS) == QUALITY_FILTERS


def test_prose_and_code_pass_everything_that_applies():
    assert quality.failing_filter(PROSE, QUALITY_FILTERS[:-1], DEFAULTS) is None
    assert quality.failing_filter(CODE, ("code",), DEFAULTS) is None


@pytest.mark.parametrize("name", sorted(FAILING))
def test_each_filter_rejects_its_document_and_only_when_enabled(name):
    text = FAILING[name]
    assert quality.failing_filter(text, (name,), DEFAULTS) == name
    assert quality.failing_filter(text, (), DEFAULTS) is None
    if name != "code":  # a prose filter: the earlier prose filters pass it
        earlier = QUALITY_FILTERS[:QUALITY_FILTERS.index(name)]
        assert quality.failing_filter(text, earlier, DEFAULTS) is None


def test_thresholds_come_from_the_config():
    short = FAILING["word_count"]
    assert quality.failing_filter(short, ("word_count",), QualityFilterConfig(min_words=3)) is None
    assert quality.failing_filter(PROSE, ("word_count",), QualityFilterConfig(max_words=10)) == "word_count"
    lines = QualityFilterConfig(max_duplicate_line_fraction=0.95)
    assert quality.failing_filter(FAILING["duplicate_lines"], ("duplicate_lines",), lines) is None


def test_first_failing_filter_in_table_order_whatever_the_listed_order():
    text = FAILING["word_count"] + " ###"   # short and symbol-heavy
    assert quality.failing_filter(text, ("symbol_ratio", "word_count"), DEFAULTS) == "word_count"
    assert quality.failing_filter(text, ("symbol_ratio",), DEFAULTS) == "symbol_ratio"


def test_unknown_filter_and_bad_thresholds_are_named_config_errors():
    with pytest.raises(config_lib.ConfigError, match="data.filters.enabled: unknown filter 'perplexity'"):
        config_lib.build_config("tiny", overrides=["data.filters.enabled=[word_count, perplexity]"])
    with pytest.raises(config_lib.ConfigError, match="data.filters.max_symbol_ratio"):
        config_lib.build_config("tiny", overrides=["data.filters.max_symbol_ratio=2"])
    with pytest.raises(config_lib.ConfigError, match="min_words"):
        config_lib.build_config("tiny", overrides=["data.filters.min_words=10",
                                                   "data.filters.max_words=5"])
    with pytest.raises(ValueError, match="unknown filter"):
        quality.failing_filter(PROSE, ("perplexity",), DEFAULTS)
    built = config_lib.build_config("tiny", overrides=["data.filters.enabled=[code]",
                                                       "data.filters.max_line_length=200"])
    assert built.data.filters.enabled == ("code",) and built.data.filters.max_line_length == 200
    assert config_lib.from_dict(config_lib.DataConfig, config_lib.to_dict(built.data)) == built.data


def test_stage_counts_and_lists_each_filtered_document(tmp_path):
    """JSONL: prose packed, each failing document skipped under its filter's counter and listed
    in the manifest; the accounting still balances."""
    enabled = QUALITY_FILTERS[:-1]              # the prose filters
    records = [PROSE, PROSE.replace("committee", "council")] + [FAILING[n] for n in enabled]
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in records))
    counters = run_stage([("docs.jsonl", str(path))], str(tmp_path / "out"),
                         config=reader_config(format="jsonl"), eval_fraction=0.5,
                         screen=DocumentScreen(DEFAULTS), filters=enabled)
    check_accounting(counters, 1, "manifest", both_splits=False)
    assert counters["documents_packed"] == 2
    expected = {n: 1 for n in enabled}
    for name in QUALITY_FILTERS:
        assert counters[f"documents_skipped_filter_{name}"] == expected.get(name, 0), name
    manifest = [json.loads(line) for line in open(tmp_path / "out" / transforms.QUARANTINE_MANIFEST)]
    assert sorted(m["reason"] for m in manifest) == sorted(
        docs.filter_reason(n) for n, k in expected.items() for _ in range(k))
    assert sum(m["bytes"] for m in manifest) == counters["bytes_quarantined"]


def test_duplicate_ngram_fraction_counts_the_words_of_each_repeat():
    """One 5-gram repeated once in otherwise distinct words: the covered characters are the
    five words of the second occurrence, so the fraction is theirs over all word characters."""
    phrase = "alpha beta gamma delta epsilon".split()
    words = [f"word{i}" for i in range(30)] + phrase + [f"other{i}" for i in range(10)] + phrase
    fraction = sum(map(len, phrase)) / sum(map(len, words))
    text = " ".join(words)
    below = QualityFilterConfig(max_duplicate_ngram_fraction=fraction - 0.001)
    above = QualityFilterConfig(max_duplicate_ngram_fraction=fraction + 0.001)
    assert quality.failing_filter(text, ("duplicate_ngrams",), below) == "duplicate_ngrams"
    assert quality.failing_filter(text, ("duplicate_ngrams",), above) is None


def test_a_source_filter_list_filters_without_data_level_filters(tmp_path):
    """data.sources[i].filters: [word_count] (docs/data.md's example) with data.filters.enabled
    empty and no decontamination: the executor's screen (screen_for) still runs that source's
    filter, counts each skip by filter name and lists it in the manifest; the other source
    (filters absent: the data-level setting, none) packs its short document."""
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.testing.test_pipeline import TestPipeline
    from components.storage.listing import list_sources
    from components.config import DataConfig, SourceConfig
    from components.corpus.screen import screen_for
    from components.text_example_gen.component import data_stage, stage_counters
    short = FAILING["word_count"]
    for name, texts in (("web", [PROSE, short, short + " again"]), ("books", [short + " too"])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "docs.jsonl").write_text(
            "".join(json.dumps({"text": t}) + "\n" for t in texts))
    data = DataConfig(seq_len=64, eval_fraction=0.5, sources=(
        SourceConfig(name="web", input=str(tmp_path / "web"), format="jsonl", document="record",
                     filters=("word_count",)),
        SourceConfig(name="books", input=str(tmp_path / "books"), format="jsonl",
                     document="record")))
    listed = list_sources(data)
    p = TestPipeline(options=PipelineOptions(["--direct_running_mode=in_memory",
                                              "--direct_num_workers=1"]), blocking=True)
    _ = p | data_stage(data, listed, str(tmp_path / "out"), None, screen_for(data))
    result = p.run()
    result.wait_until_finish()
    counters = stage_counters(str(tmp_path / "out"), ("web", "books"))
    check_accounting(counters, 2, "manifest", both_splits=False)
    assert counters["documents_skipped_filter_word_count"] == 2
    assert counters["documents_packed"] == 2                       # web's prose, books' short one
    manifest = [json.loads(line) for line in open(tmp_path / "out" / transforms.QUARANTINE_MANIFEST)]
    assert [m["reason"] for m in manifest] == [docs.filter_reason("word_count")] * 2
    assert all(m["path"].startswith("docs.jsonl") for m in manifest)


@pytest.mark.parametrize("words, fails", [(2, True), (3, False), (5, False), (6, True)])
def test_the_word_count_bounds_are_inclusive(words, fails):
    """min_words 3, max_words 5: a document of exactly 3 or 5 words passes, 2 or 6 fails."""
    thresholds = QualityFilterConfig(min_words=3, max_words=5)
    text = " ".join(["word"] * words)
    assert quality.fails_word_count(quality.Text(text), thresholds) is fails
