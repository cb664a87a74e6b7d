"""The tokenizer in the built pipeline: where TokenizerGen sits, what each stage's cache key
(exec properties) holds, so a changed tokenizer setting re-runs TokenizerGen and what follows
only; and the bits-per-byte blessing gates."""

import json

import pytest

from components.evaluation.decision import decide_blessing
from components.text_example_gen.component import data_code_digest
from components.config import EvalConfig, build_config


def _properties(pipeline) -> dict:
    return {c.id: {k: v for k, v in c.exec_properties.items()} for c in pipeline.components}



def test_tokenizer_stage_wiring_and_cache_keys(tmp_path):
    from pipeline.pipeline import create_pipeline

    def build(*overrides):
        return create_pipeline(build_config("tiny", overrides=list(overrides)),
                               pipeline_root=str(tmp_path / "root"), serving_dir=str(tmp_path / "s"),
                               input_fingerprint="f" * 64)
    sp = ["data.tokenizer=sentencepiece", "data.vocab_size=2000"]
    default, base = build(), build(*sp)
    ids = [c.id for c in base.components]
    assert ids.index("TokenizerGen") < ids.index("TextExampleGen")
    example_gen = next(c for c in base.components if c.id == "TextExampleGen")
    assert example_gen.inputs["tokenizer"].producer_component_id == "TokenizerGen"
    # The default pipeline has no tokenizer stage and the byte schema; its data stage keys on
    # the data-stage code too (issue 20: a reader fix must not leave stale byte shards cached).
    assert "TokenizerGen" not in [c.id for c in default.components]
    default_props = _properties(default)
    assert json.loads(default_props["CuratedSchemaGen"]["data_config"])["tokenizer"] == "bytes"
    assert default_props["TextExampleGen"]["code_digest"] == data_code_digest()

    props = _properties(base)
    assert json.loads(props["CuratedSchemaGen"]["data_config"])["vocab_size"] == 2000
    assert len(props["TextExampleGen"]["code_digest"]) == 64     # data + tokenizer code
    trainer_data = json.loads(json.loads(props["Trainer"]["custom_config"])["data"])
    assert (trainer_data["tokenizer"], trainer_data["vocab_size"]) == ("sentencepiece", 2000)

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
    from components.config import ConfigError
    with pytest.raises(ConfigError, match=r"eval\.max_bits_per_byte"):
        build_config("tiny", overrides=["eval.max_bits_per_byte=-1"])


def test_bits_per_byte_of_uniform_logits_by_hand(tmp_path):
    """Uniform logits over V ids: every real target costs ln V nats, so bits per byte is
    (targets x ln V) / (bytes under the targets) / ln 2, with pad targets in neither sum and
    specials (0 bytes) in the nats but not the bytes. Catches bytes counted per token instead of
    per id, or pad targets counted."""
    import math
    import types

    import numpy as np
    import tensorflow as tf

    from components.metrics.lm import evaluate_logits_fn
    from components.text_example_gen import shards as shard_files

    vocab, pad, seq_len = 8, 0, 4
    token_bytes = np.array([0, 0, 0, 1, 2, 3, 4, 5])          # ids 0-2: pad, bos, eos
    windows = np.array([[1, 3, 4, 7, 2], [1, 5, 2, 0, 0]], np.int64)
    path = str(tmp_path / "eval.gz")
    with tf.io.TFRecordWriter(path, options="GZIP") as writer:
        for record in shard_files.encode_examples(windows):
            writer.write(record)
    metrics = evaluate_logits_fn(lambda ids: tf.zeros(tf.concat([tf.shape(ids), [vocab]], 0)),
                                 [path], seq_len, 2, 0, tokenizer=types.SimpleNamespace(
                                     pad_id=pad, token_byte_lengths=lambda: token_bytes))
    targets = [3, 4, 7, 2, 5, 2]                               # pads dropped
    raw_bytes = sum(int(token_bytes[t]) for t in targets)      # 1 + 2 + 5 + 0 + 3 + 0 = 11
    assert metrics["tokens"] == len(targets) and metrics["eval_bytes"] == raw_bytes
    assert metrics["bits_per_byte"] == pytest.approx(len(targets) * math.log(vocab) / raw_bytes
                                                     / math.log(2), rel=1e-5)


def test_input_is_fingerprinted_once_per_pipeline_build(tmp_path, monkeypatch):
    """The run's one fingerprint reaches both data stages' cache keys (TokenizerGen and
    TextExampleGen) and nothing lists the input again; built without one, the pipeline and each
    data stage refuse (the runner computes it, nothing below falls back to listing the input).
    Catches: a component or create_pipeline calling fingerprint_input itself."""
    from components.storage import listing
    from pipeline import pipeline as pipeline_lib
    config = build_config("tiny", overrides=["data.tokenizer=sentencepiece", "data.vocab_size=2000"])
    calls = []
    real = listing.list_input_files
    monkeypatch.setattr(listing, "list_input_files", lambda *a, **k: calls.append(a) or real(*a, **k))
    built = pipeline_lib.create_pipeline(config, pipeline_root=str(tmp_path / "root"),
                                         serving_dir=str(tmp_path / "s"), input_fingerprint="f" * 64)
    props = _properties(built)
    assert props["TokenizerGen"]["input_fingerprint"] == props["TextExampleGen"]["input_fingerprint"] == "f" * 64
    # The held-out sets are listed for the Evaluator's cache key (their content digest); the data
    # input never is.
    calls = [c for c in calls if c[0] == config.data.input]
    assert calls == []
    from components.text_example_gen.component import TextExampleGen
    from components.tokenizer.component import TokenizerGen
    with pytest.raises(TypeError, match="input_fingerprint"):
        pipeline_lib.create_pipeline(config, pipeline_root=str(tmp_path / "root"),
                                     serving_dir=str(tmp_path / "s"))
    for stage in (TextExampleGen, TokenizerGen):
        with pytest.raises(TypeError, match="input_fingerprint"):
            stage(config)
    assert calls == []


@pytest.mark.parametrize("init_from, parent", [("", None), ("latest_blessed", "base_model_resolver")])
def test_until_keeps_the_stage_and_its_upstream_only(tmp_path, init_from, parent):
    """`bigtrain run --until Trainer`: the Trainer and what it reads, nothing downstream. With
    train.init_from=latest_blessed the Trainer's parent arrives through a ResolvedChannel (no
    producer_component_id): on the code before, AttributeError before any stage ran."""
    from pipeline.pipeline import create_pipeline
    overrides = [f"train.init_from={init_from}"] if init_from else []
    pipeline = create_pipeline(build_config("tiny", overrides=overrides),
                               pipeline_root=str(tmp_path / "root"), serving_dir=str(tmp_path / "s"),
                               input_fingerprint="f" * 64, until="Trainer")
    kept = {c.id for c in pipeline.components}
    assert kept == {"TextExampleGen", "StatisticsGen", "CuratedSchemaGen", "ExampleValidator",
                    "AnomaliesGate", "Trainer"} | ({parent} if parent else set())
