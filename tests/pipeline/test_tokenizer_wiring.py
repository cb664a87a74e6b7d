"""The tokenizer in the built pipeline: where TokenizerGen sits, what each stage's cache key
(exec properties) holds, so a changed tokenizer setting re-runs TokenizerGen and what follows
only; and the bits-per-byte blessing gates."""

import json

import pytest

from components.evaluation.component import decide_blessing
from pipeline.config import EvalConfig, build_config


def _properties(pipeline) -> dict:
    return {c.id: {k: v for k, v in c.exec_properties.items()} for c in pipeline.components}


def test_tokenizer_stage_wiring_and_cache_keys(tmp_path):
    from pipeline.pipeline import create_pipeline

    def build(*overrides):
        return create_pipeline(build_config("tiny", overrides=list(overrides)),
                               pipeline_root=str(tmp_path / "root"), serving_dir=str(tmp_path / "s"))
    sp = ["data.tokenizer=sentencepiece", "data.vocab_size=2000"]
    default, base = build(), build(*sp)
    ids = [c.id for c in base.components]
    assert ids.index("TokenizerGen") < ids.index("TextExampleGen")
    example_gen = next(c for c in base.components if c.id == "TextExampleGen")
    assert example_gen.inputs["tokenizer"].producer_component_id == "TokenizerGen"
    # The default pipeline is as before: no tokenizer stage, byte schema, same keys.
    assert "TokenizerGen" not in [c.id for c in default.components]
    default_props = _properties(default)
    assert default_props["CuratedSchemaGen"].get("vocab_size") is None
    assert default_props["TextExampleGen"].get("code_digest") is None

    props = _properties(base)
    assert props["CuratedSchemaGen"]["vocab_size"] == 2000
    assert len(props["TextExampleGen"]["code_digest"]) == 64     # data + tokenizer code
    assert json.loads(props["Trainer"]["custom_config"])["bigtrain"]

    vocab = _properties(build("data.tokenizer=sentencepiece", "data.vocab_size=3000"))
    training = _properties(build(*sp, "train.learning_rate=0.001"))
    # A tokenizer setting: TokenizerGen, the data stage, the schema and the Trainer change keys.
    for node in ("TokenizerGen", "TextExampleGen", "CuratedSchemaGen", "Trainer"):
        assert props[node] != vocab[node], node
    # A training setting: nothing before the Trainer changes.
    for node in ("TokenizerGen", "TextExampleGen", "CuratedSchemaGen"):
        assert props[node] == training[node], node
    assert props["Trainer"] != training["Trainer"]


@pytest.mark.parametrize("candidate, baseline, per_token, blessed, reason", [
    # Subword model: a loss of 6 nats/token is no failure (another unit); bits per byte decide.
    ({"loss": 6.0, "accuracy": 0.1, "bits_per_byte": 3.0}, None, False, True, "3.0000 bits/byte"),
    ({"loss": 6.0, "accuracy": 0.1, "bits_per_byte": 3.0}, None, False, False,
     "bits per byte 3.0000 > eval.max_bits_per_byte 2.5000"),
    ({"loss": 6.0, "accuracy": 0.1, "bits_per_byte": 2.2}, {"loss": 1.0, "bits_per_byte": 2.1},
     False, False, "bits per byte 2.2000 > baseline 2.1000 + eval.max_bits_per_byte_regression"),
    # Byte model: both the nats/token gates and the bits-per-byte gates apply.
    ({"loss": 2.0, "accuracy": 0.4, "bits_per_byte": 3.0}, None, True, False,
     "eval.max_bits_per_byte"),
])
def test_bits_per_byte_gates(candidate, baseline, per_token, blessed, reason):
    max_bpb = 0.0 if blessed else 2.5
    config = EvalConfig(max_loss=3.0, min_accuracy=0.0, max_bits_per_byte=max_bpb,
                        max_bits_per_byte_regression=0.05)
    decision = decide_blessing(candidate, baseline, config, per_token=per_token)
    assert decision.blessed is blessed, decision.reason
    assert reason in decision.reason


def test_bits_per_byte_setting_is_validated():
    from pipeline.config import ConfigError
    with pytest.raises(ConfigError, match=r"eval\.max_bits_per_byte"):
        build_config("tiny", overrides=["eval.max_bits_per_byte=-1"])
