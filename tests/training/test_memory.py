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
