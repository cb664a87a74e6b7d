"""Decontamination (data.decontaminate): a planted 13-gram is found whatever its case and
punctuation, 12 shared words are not, JSONL evaluation records, counts per evaluation set, and
the stage removing or flagging contaminated documents."""

import json
import random

import pytest

from components import config as config_lib
from components.config import QualityFilterConfig
from components.corpus import contamination
from components.corpus import documents as docs
from components.corpus.screen import DocumentScreen
from components.text_example_gen import transforms
from components.text_example_gen.component import check_accounting
from tests.support.data_stage import reader_config, run_stage

QUESTION = ("Which river flows through the ancient city that was the capital of the eastern "
            "empire for more than a thousand years before its fall")
PLANTED = QUESTION.split()[3:16]          # 13 consecutive words of the evaluation text


def filler(rng, words=60):
    return " ".join(f"f{rng.randrange(10**6)}" for _ in range(words))


def test_planted_13_gram_is_found_whatever_case_and_punctuation():
    index = contamination.index_texts({"quiz": [QUESTION.encode()]}, 13)
    rng = random.Random(1)
    shouted = ", ".join(w.upper() for w in PLANTED) + "!"
    assert index.matches(f"{filler(rng)} {' '.join(PLANTED)} {filler(rng)}".encode()) == ("quiz",)
    assert index.matches(f"{filler(rng)}\n{shouted}\n{filler(rng)}".encode()) == ("quiz",)
    twelve = " ".join(PLANTED[:12])
    assert index.matches(f"{filler(rng)} {twelve} {filler(rng)}".encode()) == ()
    gapped = " ".join(PLANTED[:6] + ["inserted"] + PLANTED[6:])
    assert index.matches(gapped.encode()) == ()


def test_normalization_is_stated_one():
    assert contamination.normalized(b"Don't  STOP!\n\tNow...caf\xc3\xa9") == b"don t stop now caf\xc3\xa9"


def test_digits_are_words_and_a_text_differing_only_in_digits_does_not_match():
    """Digits stay in the normalized text (module docstring): "Apollo 11, 1969" keeps 11 and
    1969; a training document whose 13 words differ from an evaluation n-gram only in a number
    is not that n-gram, the same words with the same numbers are."""
    assert contamination.normalized(b"Apollo 11 landed in July, 1969 (UTC+0)") == (
        b"apollo 11 landed in july 1969 utc 0")
    item = "In 1969 the crew of Apollo 11 landed on the moon at 20 17 UTC on July 20"
    index = contamination.index_texts({"quiz": [item.encode()]}, 13)
    assert index.matches(item.encode()) == ("quiz",)
    assert index.matches(item.replace("1969", "1972").replace("11", "17").encode()) == ()


def test_each_evaluation_set_is_indexed_on_its_own(tmp_path):
    """A .jsonl set (every string value of each record, nested too; never across records) and a
    plain text set; a pattern matching nothing is a named error."""
    (tmp_path / "quiz").mkdir()
    (tmp_path / "quiz" / "a.jsonl").write_text(
        json.dumps({"question": QUESTION, "choices": ["one", "two"], "id": 3}) + "\n"
        + json.dumps({"meta": {"passage": "alpha beta gamma"}}) + "\n")
    (tmp_path / "story.txt").write_text("once upon a time there was a small village by the sea "
                                        "where every house was painted blue")
    sets = contamination.resolve_eval_sets((str(tmp_path / "quiz" / "*.jsonl"),
                                            str(tmp_path / "story.txt")))
    index = contamination.build_index(sets, 13)
    assert index.names == (str(tmp_path / "quiz" / "*.jsonl"), str(tmp_path / "story.txt"))
    assert index.matches(" ".join(PLANTED).encode()) == (index.names[0],)
    assert index.matches(b"there was a small village by the sea where every house was painted") == (
        index.names[1],)
    # "two alpha beta ...": the end of one record and the start of the next are not one text.
    assert index.matches(b"one two alpha beta gamma") == ()
    # "alpha beta gamma", "one", "two": 3 and 1 words, under min_words (8): not checked, counted.
    assert index.matches(b"alpha beta gamma") == ()
    assert index.texts == (4, 1) and index.too_short == (3, 0)
    with pytest.raises(FileNotFoundError, match=r"data.decontaminate.eval_files\[0\] .* matches no files"):
        contamination.resolve_eval_sets((str(tmp_path / "nothing*.jsonl"),))


# Short evaluation items (fewer than 13 words): a 10-word one is checked as a whole, a 4-word one
# is under min_words (8) and is not.
SHORT_ITEM = "What is the boiling point of water at sea level?"
TINY_ITEM = "Name the largest ocean."


def test_a_short_evaluation_text_is_found_inside_a_longer_document():
    """GPT-3's rule for items shorter than n: the item's m words in a row, anywhere in a
    training document (same normalization), mark it; m - 1 of them or the words with one
    inserted do not; an item under min_words is counted, not checked; 13-grams still work."""
    index = contamination.index_texts({"quiz": [SHORT_ITEM.encode(), TINY_ITEM.encode(),
                                                QUESTION.encode()]}, 13, min_words=8)
    rng = random.Random(3)
    words = SHORT_ITEM.rstrip("?").split()
    inside = f"{filler(rng)} {SHORT_ITEM.upper().replace(' ', '  ')} {filler(rng)}"
    assert index.matched(inside.encode()) == {"quiz": 10}
    assert index.matched(SHORT_ITEM.encode()) == {"quiz": 10}          # the document is the item
    assert index.matches(f"{filler(rng)} {' '.join(words[1:])} {filler(rng)}".encode()) == ()
    gapped = " ".join(words[:4] + ["really"] + words[4:])
    assert index.matches(f"{filler(rng)} {gapped} {filler(rng)}".encode()) == ()
    assert index.matches(f"{filler(rng)} {TINY_ITEM} {filler(rng)}".encode()) == ()
    assert index.texts == (3,) and index.too_short == (1,)
    assert index.matched(f"{filler(rng)} {' '.join(PLANTED)} {filler(rng)}".encode()) == {"quiz": 13}
    lowered = contamination.index_texts({"quiz": [TINY_ITEM.encode()]}, 13, min_words=4)
    assert lowered.matched(f"{filler(rng)} name the LARGEST ocean".encode()) == {"quiz": 4}
    assert lowered.too_short == (0,)


def test_config_errors_name_the_setting():
    with pytest.raises(config_lib.ConfigError, match="data.decontaminate.action"):
        config_lib.build_config("tiny", overrides=["data.decontaminate.action=delete"])
    with pytest.raises(config_lib.ConfigError, match="data.decontaminate.ngram"):
        config_lib.build_config("tiny", overrides=["data.decontaminate.ngram=0"])
    for bad in ("0", "14"):
        with pytest.raises(config_lib.ConfigError, match=r"data.decontaminate.min_words: must be "
                                                         r"in \[1, ngram \(13\)\], got " + bad):
            config_lib.build_config("tiny", overrides=[f"data.decontaminate.min_words={bad}"])
    assert config_lib.build_config("tiny", overrides=[
        "data.decontaminate.min_words=13"]).data.decontaminate.min_words == 13


def write_training(tmp_path):
    rng = random.Random(2)
    texts = [filler(rng) for _ in range(30)]
    texts[4] = f"{filler(rng)} {' '.join(PLANTED).upper()} {filler(rng)}"
    texts[9] = f"{filler(rng)} was a small village by the sea where every house was painted blue"
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "train.txt"
    path.write_text("\n\n".join(texts))
    (tmp_path / "quiz.jsonl").write_text(json.dumps({"question": QUESTION}) + "\n")
    (tmp_path / "story.txt").write_text("once upon a time there was a small village by the sea "
                                        "where every house was painted blue")
    sets = contamination.resolve_eval_sets((str(tmp_path / "quiz.jsonl"), str(tmp_path / "story.txt")))
    return [("train.txt", str(path))], sets, texts


@pytest.mark.parametrize("action", ["remove", "flag"])
def test_stage_removes_or_flags_contaminated_documents(tmp_path, action):
    files, sets, texts = write_training(tmp_path)
    screen = DocumentScreen(QualityFilterConfig(), sets, 13, action)
    counters = run_stage(files, str(tmp_path / "out"), config=reader_config(document="separator"),
                         eval_fraction=0.3, screen=screen)
    check_accounting(counters, 1, "manifest")
    assert counters[f"{transforms.EVAL_SET_COUNTER}0"] == 1
    assert counters[f"{transforms.EVAL_SET_COUNTER}1"] == 1
    manifest = [json.loads(line) for line in open(tmp_path / "out" / transforms.QUARANTINE_MANIFEST)]
    assert [m["reason"] for m in manifest] == [docs.CONTAMINATED] * 2
    offsets = [sum(len(t) + 2 for t in texts[:k]) for k in (4, 9)]
    assert [m["path"] for m in manifest] == [f"train.txt@{o}" for o in offsets]
    assert "quiz.jsonl" in manifest[0]["detail"] and "story.txt" in manifest[1]["detail"]
    if action == "remove":
        assert counters["documents_skipped_contaminated"] == 2 and counters["documents_packed"] == 28
        assert sum(m["bytes"] for m in manifest) == counters["bytes_quarantined"]
    else:
        assert counters["documents_flagged_contaminated"] == 2 and counters["documents_packed"] == 30
        assert counters["documents_skipped_contaminated"] == 0 and counters["bytes_quarantined"] == 0
        assert all(m["packed"] for m in manifest)


def test_stage_removes_a_document_holding_a_short_evaluation_item(tmp_path):
    """A 10-word quiz item planted in the middle of a 120-word training document: removed, the
    manifest saying which item length and set; the 4-word item, planted too, is not checked."""
    rng = random.Random(5)
    texts = [filler(rng) for _ in range(12)]
    texts[3] = f"{filler(rng)} {SHORT_ITEM} {filler(rng)}"
    texts[7] = f"{filler(rng)} {TINY_ITEM} {filler(rng)}"
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "train.txt").write_text("\n\n".join(texts))
    (tmp_path / "quiz.jsonl").write_text("".join(
        json.dumps({"question": q}) + "\n" for q in (SHORT_ITEM, TINY_ITEM)))
    sets = contamination.resolve_eval_sets((str(tmp_path / "quiz.jsonl"),))
    counters = run_stage([("train.txt", str(tmp_path / "in" / "train.txt"))], str(tmp_path / "out"),
                         config=reader_config(document="separator"), eval_fraction=0.3,
                         screen=DocumentScreen(QualityFilterConfig(), sets, 13, "remove", 8))
    check_accounting(counters, 1, "manifest")
    assert counters["documents_skipped_contaminated"] == 1 and counters["documents_packed"] == 11
    manifest = [json.loads(line) for line in open(tmp_path / "out" / transforms.QUARANTINE_MANIFEST)]
    assert [m["path"] for m in manifest] == [f"train.txt@{sum(len(t) + 2 for t in texts[:3])}"]
    assert manifest[0]["detail"] == f"contains a 10-word text of {tmp_path / 'quiz.jsonl'}"


def test_report_names_each_cleaning_step_with_its_counts(tmp_path):
    """What the executor records (cleaning_properties) is what the run report reads back."""
    from components.config import DataConfig, DecontaminationConfig, NearDedupConfig
    from components.corpus.screen import screen_for
    from components.text_example_gen.component import cleaning_properties
    from pipeline.lineage import report_data
    (tmp_path / "story.txt").write_text("once upon a time")
    data = DataConfig(dedup="near", near_dedup=NearDedupConfig(threshold=0.7),
                      filters=QualityFilterConfig(enabled=("word_count", "code")),
                      decontaminate=DecontaminationConfig(eval_files=(str(tmp_path / "*.txt"),)))
    props = dict(cleaning_properties(data, screen_for(data)), documents_skipped_filter_word_count=3,
                 **{f"{transforms.EVAL_SET_COUNTER}0": 2})
    lines = report_data.cleaning_lines(props)
    assert lines[0].split()[:2] == ["dedup", "near"] and '"bands": 14' in lines[0]
    assert lines[1].split() == ["filter", "word_count", "3", "skipped"]
    assert lines[2].split() == ["filter", "code", "0", "skipped"]
    assert lines[3].split() == ["contaminated", "by", "eval", "set", "2", f"({tmp_path}/*.txt,", "1",
                                "files)"]
    # "once upon a time": 4 words, under min_words.
    assert lines[4].split() == ["eval", "texts", "too", "short", "to", "check", "1", "(<", "8",
                                "words;", f"{tmp_path}/*.txt:", "1", "of", "1)"]
    assert len(lines) == 5


def test_report_names_the_filters_of_each_source(tmp_path):
    """A mixture: the data-level filters for sources without their own list, each source's own
    list, one line per filter name (QUALITY_FILTERS order) with its count and its sources."""
    from components.config import DataConfig, SourceConfig
    from components.text_example_gen.component import cleaning_properties
    from pipeline.lineage import report_data
    data = DataConfig(filters=QualityFilterConfig(enabled=("duplicate_lines",)), sources=(
        SourceConfig(name="web", input="/w"), SourceConfig(name="code", input="/c",
                                                           filters=("code", "word_count")),
        SourceConfig(name="books", input="/b", filters=())))
    props = dict(cleaning_properties(data, None), documents_skipped_filter_word_count=4,
                 documents_skipped_filter_duplicate_lines=2)
    assert json.loads(props["quality_filters_by_source"]) == {
        "web": ["duplicate_lines"], "code": ["code", "word_count"], "books": []}
    assert [line.split() for line in report_data.cleaning_lines(props)[1:]] == [
        ["filter", "word_count", "4", "skipped", "(sources:", "code)"],
        ["filter", "duplicate_lines", "2", "skipped", "(sources:", "web)"],
        ["filter", "code", "0", "skipped", "(sources:", "code)"]]
    # An artifact from before per-source filters: the data-level list.
    del props["quality_filters_by_source"]
    assert [line.split()[:3] for line in report_data.cleaning_lines(props)[1:]] == [
        ["filter", "duplicate_lines", "2"]]


def test_editing_an_evaluation_set_changes_the_input_fingerprint(tmp_path):
    """The data stage's cache key covers the evaluation files, not only their pattern."""
    from components.storage.listing import fingerprint_input
    from components.config import DataConfig, DecontaminationConfig
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("training text")
    (tmp_path / "eval.txt").write_text("evaluation text")
    plain = DataConfig(input=str(tmp_path / "in"), exclude=())
    data = DataConfig(input=str(tmp_path / "in"), exclude=(),
                      decontaminate=DecontaminationConfig(eval_files=(str(tmp_path / "eval.txt"),)))
    before = fingerprint_input(data)
    assert before != fingerprint_input(plain)
    (tmp_path / "eval.txt").write_text("evaluation text, edited")
    assert fingerprint_input(data) != before
