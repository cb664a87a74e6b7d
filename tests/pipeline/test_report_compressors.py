"""The run report says plainly where the model stands against zlib-9 and lzma-9: on whole eval
documents (the Evaluator's headline) and on its window sample (the Trainer's), from hand-made MLMD
properties.

Mutations these catch: the comparison turned around (a lower bits/byte is better), the margin
taken from the wrong compressor, the line missing from format_report, a line printed for a model
without compressor figures, the concatenated figure shown as the per-document one."""

from pipeline.lineage.report import RunReport, StageReport, format_report
from pipeline.lineage.standing import compressor_standing, document_standing

MODEL = {"id": 7, "uri": "/m", "steps": 10, "eval_loss": 2.0, "unigram_baseline_loss": 5.5,
         "tokens_per_second": 1.0, "zlib9_bits_per_byte": 2.699, "lzma9_bits_per_byte": 2.132}


def test_a_model_between_the_compressors_beats_zlib_and_is_behind_lzma():
    text = compressor_standing(dict(MODEL, eval_bits_per_byte=2.40))
    assert text == "beats zlib-9 by 0.299; behind lzma-9 by 0.268 bits/byte (same eval sample)"


def test_a_model_below_both_beats_both_and_one_above_both_is_behind_both():
    assert compressor_standing(dict(MODEL, eval_bits_per_byte=2.0)) == \
        "beats zlib-9 by 0.699 and lzma-9 by 0.132 bits/byte (same eval sample)"
    assert compressor_standing(dict(MODEL, eval_bits_per_byte=2.997)) == \
        "behind zlib-9 by 0.298 and lzma-9 by 0.865 bits/byte (same eval sample)"


def test_the_line_is_in_the_training_section_and_absent_without_figures():
    stages = [StageReport("Trainer", "complete", 1.0, 1,
                          outputs={"Model": dict(MODEL, eval_bits_per_byte=2.40)})]
    (line,) = [l for l in format_report(RunReport("r", stages)).splitlines() if "window sample" in l]
    assert "beats zlib-9 by 0.299; behind lzma-9 by 0.268" in line
    assert compressor_standing({"eval_bits_per_byte": 2.4}) == ""


EVALUATION = {"id": 9, "uri": "/e", "loss": 1.5, "document_bits_per_byte": 2.30,
              "document_bits_per_byte_standard_error": 0.05, "document_zlib9_bits_per_byte": 2.9,
              "document_lzma9_bits_per_byte": 2.1, "concatenated_zlib9_bits_per_byte": 2.7,
              "concatenated_lzma9_bits_per_byte": 1.8, "document_count": 12,
              "document_bytes": 65536}


def test_the_whole_document_lines_come_from_the_evaluator_and_name_each_figure():
    first, second = document_standing(EVALUATION)
    assert "2.3000 bits/byte (+/- 0.0500) on 12 eval documents, 65536 bytes" in first
    assert "beats zlib-9 by 0.600; behind lzma-9 by 0.200" in first        # per-document figures
    assert "zlib-9 2.7000, lzma-9 1.8000" in second and "concatenated" in second
    stages = [StageReport("LanguageModelEvaluator", "complete", 1.0, 2,
                          outputs={"ModelEvaluation": EVALUATION})]
    text = format_report(RunReport("r", stages))
    assert first in text and second in text
    assert document_standing({"loss": 1.5}) == []                     # an older evaluation


def test_each_held_out_set_gets_its_own_lines_from_its_prefixed_figures():
    sets = {"heldout_sets": "code,prose", "heldout_code_document_bits_per_byte": 2.5,
            "heldout_code_document_zlib9_bits_per_byte": 2.2,
            "heldout_code_document_lzma9_bits_per_byte": 1.9, "heldout_code_document_count": 3,
            "heldout_code_document_bytes": 9000, "heldout_prose_document_bits_per_byte": 1.0,
            "heldout_prose_document_zlib9_bits_per_byte": 3.0,
            "heldout_prose_document_lzma9_bits_per_byte": 2.8}
    lines = document_standing(dict(EVALUATION, **sets))
    (code,) = [l for l in lines if "held-out code" in l]
    assert "2.5000 bits/byte" in code and "on 3 documents, 9000 bytes" in code
    assert "behind zlib-9 by 0.300 and lzma-9 by 0.600" in code
    (prose,) = [l for l in lines if "held-out prose" in l]
    assert "beats zlib-9 by 2.000 and lzma-9 by 1.800" in prose
    assert document_standing(sets)[0].strip().startswith("held-out code")   # no eval-split figures


def test_a_set_under_a_few_kb_gets_a_plain_line_instead_of_a_verdict():
    """90 bytes of a held-out set (issue 57: "beats lzma-9 by 18.175 bits/byte", the xz header):
    the figure, and why there is no comparison; at COMPARABLE_BYTES the verdict is back. Catches
    the verdict printed whatever the size."""
    small = {"heldout_sets": "tiny", "heldout_tiny_document_bits_per_byte": 3.0,
             "heldout_tiny_document_zlib9_bits_per_byte": 9.0,
             "heldout_tiny_document_lzma9_bits_per_byte": 21.175,
             "heldout_tiny_document_count": 1, "heldout_tiny_document_bytes": 90}
    (line,) = document_standing(small)
    assert "3.0000 bits/byte" in line and "on 1 documents, 90 bytes" in line
    assert "too few bytes to compare with zlib-9 / lzma-9 (under 4096" in line
    assert "beats" not in line and "behind" not in line
    (line,) = document_standing(dict(small, heldout_tiny_document_bytes=4096))
    assert "beats zlib-9 by 6.000 and lzma-9 by 18.175" in line


def test_skipped_texts_and_a_task_set_without_items_each_get_one_plain_line():
    """A set's texts skipped as binary / not UTF-8 are counted on one line under the set; a task
    set that yields no item says so instead of printing nothing. Catches the counts dropped from
    the report, and the no-item case silent as before."""
    figures = {"heldout_sets": "code", "heldout_code_document_bits_per_byte": 2.5,
               "heldout_code_document_zlib9_bits_per_byte": 2.2,
               "heldout_code_document_lzma9_bits_per_byte": 1.9, "heldout_code_document_count": 3,
               "heldout_code_document_bytes": 9000, "heldout_code_skipped_binary": 2.0,
               "heldout_code_skipped_not_utf8": 1.0, "task_items": 0, "task_set": "code"}
    lines = document_standing(figures)
    assert [l.split() for l in lines if "skipped" in l] == [
        ["skipped", "2", "binary,", "1", "not_utf8", "text(s)", "of", "held-out", "code:", "not",
         "scored"]]
    (task,) = [l for l in lines if "code tasks" in l]
    assert "none: held-out code yields no task item" in task
    quiet = dict(figures, heldout_code_skipped_binary=0.0, heldout_code_skipped_not_utf8=0.0)
    assert not [l for l in document_standing(quiet) if "skipped" in l]
