"""The Evaluator's cache key (its exec properties) carries the held-out sets' content digest
(issue 57: a set file rewritten with other text, and `bigtrain run --force` kept the Evaluator
`cached` with the old figures: TFX keys a stage on its exec properties and inputs, and the set
file is neither). Built pipelines only, nothing runs."""

import os

from components.config import build_config
from components.evaluation import held_out_sets


def test_a_rewritten_set_file_changes_the_evaluators_cache_key_only(tmp_path):
    """Same size, same mtime, other bytes: the Evaluator's sets_fingerprint changes, every other
    stage's exec properties stay (their caches still hit). Catches the Evaluator built without
    the digest (TFX serves the cached Evaluator with --force)."""
    from pipeline.pipeline import create_pipeline
    path = tmp_path / "set.py"
    path.write_bytes(b"x = 1\n")
    config = build_config("tiny", overrides=[
        f"eval.sets=[{{name: mine, input: '{path}', decontaminate: false}}]"])

    def properties():
        built = create_pipeline(config, pipeline_root=str(tmp_path / "root"),
                                serving_dir=str(tmp_path / "serving"), input_fingerprint="f" * 64)
        return {c.id: dict(c.exec_properties) for c in built.components}
    before, stat = properties(), os.stat(path)
    assert before["LanguageModelEvaluator"]["sets_fingerprint"] == \
        held_out_sets.sets_fingerprint(config.eval)
    path.write_bytes(b"y = 2\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    after = properties()
    assert after["LanguageModelEvaluator"]["sets_fingerprint"] != \
        before["LanguageModelEvaluator"]["sets_fingerprint"]
    assert {k: v for k, v in after.items() if k != "LanguageModelEvaluator"} == \
        {k: v for k, v in before.items() if k != "LanguageModelEvaluator"}
