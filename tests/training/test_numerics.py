"""Model and loop numerics: float32 residual stream under mixed precision (dtypes at block
boundaries; bf16/fp16 training tracks float32), dropout off in evaluation and export, weight decay
by role, the schedule on the one step counter, the stop after too many skipped steps, the early
memory check."""

import functools

import numpy as np
import pytest
import tensorflow as tf

from components.model import gpt, llama
from components.tokenizer.byte_level import PAD_ID, VOCAB_SIZE, ByteTokenizer
from components.training import loop, optimizer as optimizer_lib, train_step
from components.serving.export import export_saved_model
from components.training.optimizer import learning_rate_at
from components.training.strategy import make_strategy
from tests.training.conftest import GPT2, SEQ_LEN, tiny_config

# Mean |loss difference| to a float32 run of the same data and seed over 30 steps of the tiny model
# (the loss falls from 5.29 to 3.64 nats). Measured: bf16 1.2e-4 (max 3.4e-4), fp16 3.1e-5.
TRACKING_TOLERANCE = {"mixed_bfloat16": 2e-3, "mixed_float16": 1e-3}


BLOCKS = {"gpt2": gpt.Block, "llama": llama.LlamaBlock}


@pytest.mark.parametrize("precision, arch", [("mixed_bfloat16", "llama"), ("mixed_float16", "llama"),
                                             ("mixed_bfloat16", "gpt2")])
def test_residual_stream_float32_at_block_boundaries(monkeypatch, precision, arch):
    seen = []
    original = BLOCKS[arch].call

    @functools.wraps(original)
    def recording(self, x, training=False, seed=None):
        out = original(self, x, training=training, seed=seed)
        seen.append((x.dtype, out.dtype))
        return out

    monkeypatch.setattr(BLOCKS[arch], "call", recording)
    config = tiny_config(f"runtime.precision={precision}", *(GPT2 if arch == "gpt2" else ()))
    model = gpt.build_model(config.model, SEQ_LEN, precision, vocab_size=VOCAB_SIZE)
    seen.clear()
    logits = model(tf.zeros([2, SEQ_LEN], tf.int32), training=True)
    assert seen == [(tf.float32, tf.float32)] * config.model.n_layer
    assert logits.dtype == tf.float32
    compute = {"mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}[precision]
    block = model.blocks[0]
    assert block.fc.compute_dtype == block.attn.qkv.compute_dtype == compute   # matmuls
    assert block.fc.kernel.dtype == "float32" and block.ln1.compute_dtype == "float32"


@pytest.fixture(scope="module")
def float32_losses(shards, tmp_path_factory):
    return track(shards, tmp_path_factory.mktemp("f32"), "float32")


def track(shards, tmp_path, precision):
    losses = []
    config = tiny_config(f"runtime.precision={precision}", "train.train_steps=30",
                         "train.warmup_steps=3", "train.learning_rate=3e-3", "train.log_every=30")
    loop.train(config, shards["train"], str(tmp_path / "run"), str(tmp_path / "ckpt"),
               on_step=lambda step, loss: losses.append(loss))
    return np.array(losses)


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
@pytest.mark.parametrize("precision", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_tracks_float32_loss(shards, tmp_path, float32_losses, precision):
    losses = track(shards, tmp_path, precision)
    assert float32_losses[-5:].mean() < float32_losses[:5].mean() - 0.5          # it learns
    assert np.mean(np.abs(losses - float32_losses)) <= TRACKING_TOLERANCE[precision]


@pytest.mark.slow   # trains and exports a model (fast tier: docs/benchmarks.md)
def test_dropout_off_in_evaluation_and_export(shards, tmp_path):
    config = tiny_config("model.dropout=0.1")
    model = gpt.build_model(config.model, SEQ_LEN, vocab_size=VOCAB_SIZE)
    plain = gpt.build_model(tiny_config().model, SEQ_LEN, vocab_size=VOCAB_SIZE)  # dropout 0
    plain.set_weights(model.get_weights())
    ids = tf.constant(np.arange(2 * SEQ_LEN).reshape(2, SEQ_LEN) % 256, tf.int32)
    assert not np.allclose(model(ids, training=True), plain(ids, training=True))  # dropout is live
    np.testing.assert_array_equal(model(ids, training=False), plain(ids, training=False))
    byte = ByteTokenizer()
    assert (loop.evaluate(model, shards["eval"], SEQ_LEN, 8, 2, tokenizer=byte)
            == loop.evaluate(plain, shards["eval"], SEQ_LEN, 8, 2, tokenizer=byte))
    export_saved_model(model, config.model, SEQ_LEN, str(tmp_path / "export"), tokenizer=byte)
    served = tf.saved_model.load(str(tmp_path / "export")).signatures["token_logits"]
    first, second = (served(input_ids=ids)["logits"].numpy() for _ in range(2))
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(first, plain(ids, training=False), atol=1e-5)


@pytest.mark.parametrize("arch", [GPT2, ["model.qk_norm=true"]], ids=["gpt2", "llama"])
def test_weight_decay_by_role_not_by_name(arch):
    """A model called `gpt-beta-bias` (names that a regex on 'beta'/'bias' would match): Dense
    kernels and embeddings decay, biases and norm scales/offsets (LayerNorm; RMSNorm, QK-norm
    included) do not."""
    config = tiny_config("model.name=gpt-beta-bias", "model.n_layer=1", *arch)
    model = gpt.build_model(config.model, SEQ_LEN, vocab_size=VOCAB_SIZE)
    decayed = lambda optimizer: sorted(v.path for v in model.trainable_variables
                                       if optimizer._use_weight_decay(v))
    kernels = ["gpt-beta-bias/block_0/attn/qkv/kernel", "gpt-beta-bias/block_0/attn/proj/kernel",
               "gpt-beta-bias/block_0/fc/kernel", "gpt-beta-bias/block_0/fc_out/kernel"]
    tables = ["gpt-beta-bias/token_embedding/embeddings"] + (
        ["gpt-beta-bias/position_embedding/embeddings"] if config.model.arch == "gpt2" else [])
    assert decayed(optimizer_lib.make_optimizer(config.train, model, learning_rate=1e-3)) == sorted(tables + kernels)
    no_embeddings = tiny_config("model.name=gpt-beta-bias", "model.n_layer=1",
                                "train.decay_embeddings=false", *arch)
    assert decayed(optimizer_lib.make_optimizer(no_embeddings.train, model,
                                                  learning_rate=1e-3)) == sorted(kernels)


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_gpt2_initialization(arch):
    """Both blocks: N(0, 0.02), the residual projections N(0, 0.02 / sqrt(2 L)), norms at 1."""
    config = tiny_config("model.n_layer=8", "model.d_model=64", *(GPT2 if arch == "gpt2" else ()))
    model = gpt.build_model(config.model, SEQ_LEN, vocab_size=VOCAB_SIZE)
    block = model.blocks[3]
    residual = 0.02 / np.sqrt(2 * 8)
    for kernel, std in [(block.attn.qkv.kernel, 0.02), (block.fc.kernel, 0.02),
                        (block.attn.proj.kernel, residual), (block.fc_out.kernel, residual),
                        (model.token_embedding.embeddings, 0.02)]:
        assert np.std(kernel.numpy()) == pytest.approx(std, rel=0.1)
    if arch == "gpt2":
        assert not np.any(block.fc.bias.numpy()) and np.all(block.ln1.gamma.numpy() == 1)
    else:
        assert block.fc.bias is None and np.all(block.ln1.scale.numpy() == 1)


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_schedule_follows_the_step_counter_through_a_skipped_step(shards):
    """A skipped (non-finite) step still advances the one step counter, so the next applied step
    uses lr(step 1), not lr(0) again; the optimizer's own count (Adam's bias correction) is 1."""
    config = tiny_config("runtime.precision=mixed_float16", "train.warmup_steps=2")
    strategy = make_strategy(config.runtime)
    model, state, optimizer, _ = loop.build_training(config, strategy)
    from components.training import input as input_lib
    step = train_step.make_train_step(model, optimizer, strategy, state, global_batch_size=16,
                                      accumulation_steps=1, clip_norm=1.0,
                                      dynamic_loss_scale=True, pad_id=PAD_ID)
    iterator = iter(input_lib.make_dataset(shards["train"], SEQ_LEN, 16))
    state.loss_scale.assign(3e38)                 # float16 gradients overflow: skipped
    assert not bool(step(iterator)[2])
    state.loss_scale.assign(2.0**10)
    lr_used = float(optimizer.learning_rate)      # what the next apply reads
    assert bool(step(iterator)[2])
    t = config.train
    assert lr_used == pytest.approx(float(learning_rate_at(1, t.learning_rate, t.min_learning_rate, 2, t.train_steps)))
    assert int(state.step.numpy()) == 2 and int(optimizer.iterations.numpy()) == 1


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_consecutive_skipped_steps_end_the_run(shards, tmp_path, monkeypatch):
    # Every gradient made infinite: every step is skipped.
    monkeypatch.setattr(train_step, "unscale", lambda grads, scale: [g * np.inf for g in grads])
    config = tiny_config("train.train_steps=10", "train.max_consecutive_skipped=3")
    with pytest.raises(loop.TrainingDiverged, match=r"3 steps in a row.*train.max_consecutive_skipped=3"):
        loop.train(config, shards["train"], str(tmp_path / "run"), str(tmp_path / "ckpt"))


@pytest.mark.parametrize("overrides,setting", [
    (("runtime.device_memory_gb=0.001",), "train.accumulation_steps"),
    (("runtime.device_memory_gb=0.03", "eval.batch_size=4096"), "eval.batch_size"),
])
def test_memory_estimate_fails_early_naming_the_setting(shards, tmp_path, overrides, setting):
    config = tiny_config(*overrides)
    with pytest.raises(MemoryError, match=setting):
        loop.train(config, shards["train"], str(tmp_path / "run"), str(tmp_path / "ckpt"))


def test_memory_estimate_of_large_preset_with_remat_is_smaller():
    from components.training import memory
    from components.config import build_config
    plain = memory.estimate(build_config("large"), 384_000_000, 8)
    remat = memory.estimate(build_config("large", overrides=["train.remat=blocks"]), 384_000_000, 8)
    assert remat.activations_per_micro_batch < plain.activations_per_micro_batch / 5
    assert plain.parameters == 4 * 384_000_000 and plain.optimizer_state == 8 * 384_000_000


def test_large_preset_with_remat_and_xla_validates():
    """The issue's done-when command: `bigtrain config --preset large --set train.remat=blocks
    --set runtime.xla=on` (YAML reads `on` as true: runtime.xla takes it as "on")."""
    from components.config import ConfigError, build_config
    config = build_config("large", overrides=["train.remat=blocks", "runtime.xla=on"])
    assert (config.train.remat, config.runtime.xla) == ("blocks", "on")
    assert build_config("tiny", overrides=["runtime.xla=off"]).runtime.xla == "off"
    with pytest.raises(ConfigError, match="train.remat"):
        build_config("tiny", overrides=["train.remat=everything"])
