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
from tests.components.test_transforms import reader_config, run_stage

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
    assert index.matches(b"alpha beta gamma") == (index.names[0],)    # a short text: one n-gram
    with pytest.raises(FileNotFoundError, match="data.decontaminate.eval_files: .* matches no files"):
        contamination.resolve_eval_sets((str(tmp_path / "nothing*.jsonl"),))


def test_config_errors_name_the_setting():
    with pytest.raises(config_lib.ConfigError, match="data.decontaminate.action"):
        config_lib.build_config("tiny", overrides=["data.decontaminate.action=delete"])
    with pytest.raises(config_lib.ConfigError, match="data.decontaminate.ngram"):
        config_lib.build_config("tiny", overrides=["data.decontaminate.ngram=0"])


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


def test_report_names_each_cleaning_step_with_its_counts(tmp_path):
    """What the executor records (cleaning_properties) is what the run report reads back."""
    from components.config import DataConfig, DecontaminationConfig, NearDedupConfig
    from components.corpus.screen import screen_for
    from components.text_example_gen.component import cleaning_properties
    from pipeline.lineage import report
    (tmp_path / "story.txt").write_text("once upon a time")
    data = DataConfig(dedup="near", near_dedup=NearDedupConfig(threshold=0.7),
                      filters=QualityFilterConfig(enabled=("word_count", "code")),
                      decontaminate=DecontaminationConfig(eval_files=(str(tmp_path / "*.txt"),)))
    props = dict(cleaning_properties(data, screen_for(data)), documents_skipped_filter_word_count=3,
                 **{f"{transforms.EVAL_SET_COUNTER}0": 2})
    lines = report.cleaning_lines(props)
    assert lines[0].split()[:2] == ["dedup", "near"] and '"bands": 14' in lines[0]
    assert lines[1].split() == ["filter", "word_count", "3", "skipped"]
    assert lines[2].split() == ["filter", "code", "0", "skipped"]
    assert lines[3].split() == ["contaminated", "by", "eval", "set", "2", f"({tmp_path}/*.txt,", "1",
                                "files)"]


def test_editing_an_evaluation_set_changes_the_input_fingerprint(tmp_path):
    """The data stage's cache key covers the evaluation files, not only their pattern."""
    from components.common.listing import fingerprint_input
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
