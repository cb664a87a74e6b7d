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
            "heldout_code_document_bytes": 900, "heldout_prose_document_bits_per_byte": 1.0,
            "heldout_prose_document_zlib9_bits_per_byte": 3.0,
            "heldout_prose_document_lzma9_bits_per_byte": 2.8}
    lines = document_standing(dict(EVALUATION, **sets))
    (code,) = [l for l in lines if "held-out code" in l]
    assert "2.5000 bits/byte" in code and "on 3 documents, 900 bytes" in code
    assert "behind zlib-9 by 0.300 and lzma-9 by 0.600" in code
    (prose,) = [l for l in lines if "held-out prose" in l]
    assert "beats zlib-9 by 2.000 and lzma-9 by 1.800" in prose
    assert document_standing(sets)[0].strip().startswith("held-out code")   # no eval-split figures
