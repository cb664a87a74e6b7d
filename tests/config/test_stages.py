"""One declaration per stage (components/config/stages.py): a stage's hand-off, cache key and the
Trainer's checkpoint key all come from its StageReads; a section a stage was not sent raises
instead of silently taking its defaults; one setting changes the keys of exactly the stages that
read it (against a hand-written table)."""

from __future__ import annotations

import dataclasses

import pytest

from components.config import Config, ConfigError, build_config, merge, stages


def declarations() -> dict:
    from components.evaluation.component import EVALUATOR_READS
    from components.push.executor import PUSHER_READS
    from components.text_example_gen.component import DATA_READS
    from components.tokenizer.component import TOKENIZER_READS
    from components.training.run_fn import TRAINER_READS
    from components.tuner.component import TUNER_READS
    from components.validation.schema_gen import SCHEMA_READS
    return {d.stage: d for d in (TOKENIZER_READS, DATA_READS, SCHEMA_READS, TUNER_READS,
                                 TRAINER_READS, EVALUATOR_READS, PUSHER_READS)}


def test_reading_a_section_the_stage_was_not_sent_raises_naming_it_and_the_declaration():
    from components.training.run_fn import TRAINER_READS
    config = build_config("tiny", None, ["train.learning_rate=0.002"])
    rebuilt = stages.read_back(TRAINER_READS, stages.handoff(TRAINER_READS, config))
    assert rebuilt.train == config.train and rebuilt.model == config.model   # declared: as sent
    # Inside the Trainer the paths and the eval sets used to be silent defaults.
    for section, name in (("paths", "home"), ("push", "formats"), ("tune", "trials")):
        with pytest.raises(ConfigError, match=rf"Trainer read {section}\.{name}, but the section "
                           rf"'{section}' is not in its declaration \(components/training/run_fn"
                           rf"\.py TRAINER_READS: data, model, train, runtime, eval, export\)"):
            getattr(getattr(rebuilt, section), name)


def test_a_hand_off_without_a_declared_section_is_refused_by_name():
    from components.push.executor import PUSHER_READS
    with pytest.raises(ConfigError, match=r"Pusher: its hand-off lacks \['push'\]"):
        stages.read_back(PUSHER_READS, {})


def test_a_partly_read_section_is_handed_off_with_the_other_fields_at_their_defaults():
    from components.training.run_fn import TRAINER_READS
    config = build_config("tiny", None, ["eval.max_loss=3.5", "eval.batch_size=4"])
    rebuilt = stages.read_back(TRAINER_READS, stages.handoff(TRAINER_READS, config))
    assert rebuilt.eval.batch_size == 4
    assert rebuilt.eval.max_loss == type(config.eval)().max_loss   # the Evaluator's gate, not sent


# (setting, value) -> the stages whose cache key changes: written by hand from what each stage
# does, not from the declarations.
EXPECTED = [
    ("train.learning_rate", 0.002, {"Trainer", "Tuner"}),
    ("train.init_from", "latest_blessed", {"Trainer"}),     # trials start from random weights
    ("model.n_layer", 3, {"Trainer", "Tuner"}),
    ("runtime.precision", "mixed_bfloat16", {"Trainer", "Tuner"}),
    ("runtime.beam_args", ("--direct_num_workers=2",), set()),
    ("data.seq_len", 64, {"TextExampleGen", "CuratedSchemaGen", "Trainer", "Tuner"}),
    ("data.vocab_size", 4000, {"TokenizerGen", "TextExampleGen", "CuratedSchemaGen", "Trainer",
                               "Tuner"}),
    ("data.tokenizer", "sentencepiece", {"TokenizerGen", "TextExampleGen", "CuratedSchemaGen",
                                         "Trainer", "Tuner"}),
    ("data.split_salt", "other", {"TokenizerGen", "TextExampleGen"}),
    ("data.train_shards", 3, {"TextExampleGen"}),
    ("eval.max_loss", 3.5, {"LanguageModelEvaluator"}),
    ("eval.batch_size", 4, {"Trainer", "Tuner", "LanguageModelEvaluator"}),
    ("export.serve", "int8", {"LanguageModelEvaluator"}),
    ("export.quantize", ("int8",), {"Trainer", "LanguageModelEvaluator"}),
    ("push.keep_versions", 2, {"Pusher"}),
    ("push.formats", ("hf",), {"Pusher"}),
    ("tune.trials", 2, {"Tuner"}),
    ("paths.home", "/elsewhere", set()),
    ("orchestrator.retries", 3, set()),
]


def _set(config: Config, dotted: str, value) -> Config:
    section, name = dotted.split(".", 1)
    return merge(config, {section: {name: list(value) if isinstance(value, tuple) else value}})


@pytest.mark.parametrize("dotted,value,expected", EXPECTED, ids=[row[0] for row in EXPECTED])
def test_one_setting_changes_the_keys_of_exactly_the_stages_that_read_it(dotted, value, expected):
    base = build_config("tiny")
    changed = _set(base, dotted, value)
    assert getattr(getattr(changed, dotted.split(".")[0]), dotted.split(".")[1]) != getattr(
        getattr(base, dotted.split(".")[0]), dotted.split(".")[1])
    moved = {name for name, d in declarations().items()
             if stages.handoff(d, base) != stages.handoff(d, changed)}
    assert moved == expected


@pytest.mark.parametrize("dotted,value,retrains", [
    ("train.learning_rate", 0.002, True), ("model.n_layer", 3, True),
    ("data.seq_len", 64, True), ("eval.batch_size", 4, False), ("export.quantize", ("int8",), False),
    ("runtime.cluster", "ray", False), ("runtime.beam_args", ("--x",), False)])
def test_the_checkpoint_key_follows_the_model_sections_only(dotted, value, retrains):
    """The Trainer's checkpoint key (model_view): what decides the model, not where it trains
    nor what it measures or writes after training (a re-run resumes instead of training again)."""
    from components.training.run_fn import TRAINER_READS
    base = build_config("tiny")
    changed = dataclasses.replace(_set(base, dotted, value))
    assert (stages.model_view(TRAINER_READS, base)
            != stages.model_view(TRAINER_READS, changed)) is retrains


def test_a_custom_config_key_outside_the_declaration_is_refused_both_ways(tmp_path):
    """The keys a custom_config stage gets beside its sections are declared too (extras): the
    Trainer's own hand-off passes, an undeclared key raises naming the declaration when the
    hand-off is built and when the stage reads it. Caught: read_custom as plain read_back (an
    extra key smuggled past the declaration), an extra missing from TRAINER_READS.extras."""
    from components.training.run_fn import DATA_FACTS, TRAINER_READS, trainer_custom_config
    config = build_config("tiny", None, [f"paths.home={tmp_path}", "tracking.backends=[mlflow]"])
    custom = dict(trainer_custom_config(config, "/ckpt"), **{DATA_FACTS: "{}"})
    assert stages.read_custom(TRAINER_READS, custom).train == config.train
    declared = r"components/training/run_fn\.py TRAINER_READS: sections .*, extras .*"
    with pytest.raises(ConfigError, match=rf"Trainer: custom_config keys \['learning_rate'\] are "
                                          rf"not in its declaration \({declared}\)"):
        stages.read_custom(TRAINER_READS, dict(custom, learning_rate="0.1"))
    with pytest.raises(ConfigError, match=r"keys \['seed'\] are not in its declaration"):
        stages.custom_config(TRAINER_READS, config, seed="1")
