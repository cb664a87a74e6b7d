"""The memory estimate sees the real vocabulary (issue 20, item 2)."""

import pytest

from components.config import build_config
from components.training import memory

GIB = 2.0**30


def test_small_preset_with_a_32k_vocabulary_counts_its_logits():
    """Fails before the fix (memory.py hard-coded V = 259: the 32k estimate equalled the byte
    one, missing the 12 V bytes per token of float32 logits and their gradient, ~11.6 GiB for
    `small`'s 64 x 512 tokens per micro-batch). Reference: 12 bytes x (32000 - 259) x 64 x 512."""
    byte_config = build_config("small")
    sp_config = build_config("small", overrides=["data.tokenizer=sentencepiece",
                                                  "data.vocab_size=32000"])
    n_params = 11_000_000
    byte_estimate = memory.estimate(byte_config, n_params, 1)
    sp_estimate = memory.estimate(sp_config, n_params, 1)
    missed = sp_estimate.activations_per_micro_batch - byte_estimate.activations_per_micro_batch
    assert missed == 12 * (32000 - 259) * 64 * 512
    assert missed / GIB == pytest.approx(11.6, abs=0.05)
    # An explicit vocabulary (a loaded tokenizer's) wins over the config's.
    assert memory.estimate(byte_config, n_params, 1, vocab_size=32000).training_total == \
        sp_estimate.training_total
    # The early error fires on a device that holds the byte model but not the 32k one.
    device = (byte_estimate.training_total + sp_estimate.training_total) / 2
    memory.check(byte_config, memory.estimate(byte_config, n_params, 1, device), 1)
    with pytest.raises(MemoryError, match="train.accumulation_steps"):
        memory.check(sp_config, memory.estimate(sp_config, n_params, 1, device), 1)


def test_block_activations_follow_the_arch():
    """Per token, one block, float32 (s = 4), T = 128, C = 64, H = 4: gpt2's formula unchanged;
    llama with 2 key/value heads (K = 2 x 16 = 32) and SwiGLU width F = 192 (170.7 rounded up
    to 32): 12 C + s (6 C + 3 K + 4 F) + 8 (C + K) + H T (9 + s)."""
    scores = 4 * 128 * 13
    gpt2 = build_config("tiny", overrides=["model.arch=gpt2"]).model
    assert memory.block_activation_bytes(gpt2, 128, 4) == 64 * (12 + 15 * 4) + scores
    llama = build_config("tiny", overrides=["model.n_kv_head=2"]).model
    expected = 12 * 64 + 4 * (6 * 64 + 3 * 32 + 4 * 192) + 8 * (64 + 32) + scores
    assert memory.block_activation_bytes(llama, 128, 4) == expected


@pytest.mark.parametrize("arch, seq_len", [
    ("gpt2", 1_000_000),
    # A rotary model's seq_len + export.max_new_tokens is bounded by 2^16 (a config rule): the
    # largest it allows still needs terabytes.
    ("llama", 60_000),
])
def test_a_huge_seq_len_is_refused_before_the_model_is_built(arch, seq_len, tmp_path, monkeypatch):
    """data.seq_len=1000000 (the issue's probe): the attention scores alone (b x L x H x T^2 x 13
    bytes in float32) are petabytes. The Trainer must refuse with the named memory error before
    it builds the model: building it (position table, a forward pass over T tokens) dies in
    TensorFlow."""
    import tensorflow as tf
    from components.training import loop
    config = build_config("tiny", overrides=[f"model.arch={arch}", "model.n_kv_head=0",
                                             f"data.seq_len={seq_len}", "runtime.device_memory_gb=80"])
    t, m = config.train, config.model
    scores = t.global_batch_size * m.n_layer * m.n_head * seq_len**2 * 13
    embedding, block, final = memory.parameter_split(config)
    estimate = memory.estimate(config, embedding + m.n_layer * block + final, 1, 80 * GIB)
    assert estimate.activations_per_micro_batch > scores

    def build_training(*args, **kwargs):
        raise AssertionError("the model was built before the memory check")
    monkeypatch.setattr(loop, "build_training", build_training)
    with pytest.raises(MemoryError, match=rf"but the device has 80\.0 GiB.*lower data\.seq_len "
                                          rf"\(now {seq_len}"):
        loop.train(config, [], str(tmp_path / "run"), str(tmp_path / "ckpt"),
                   strategy=tf.distribute.get_strategy())
