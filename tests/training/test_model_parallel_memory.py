"""Issue 21 memory estimate: per-device bytes under sharded optimizer state and pipeline stages,
against hand counts. Catches moments not divided by R, stages that all count the embeddings,
a stage split that loses or duplicates blocks, and an analytic parameter count that drifts from
the model (the tiny model is built and counted)."""

import math

import pytest

from components.config import build_config
from components.tokenizer.byte_level import VOCAB_SIZE
from components.training import memory

GIB = memory.GIB


@pytest.mark.parametrize("arch", [["model.arch=gpt2"], ["model.n_kv_head=2", "model.qk_norm=true"]],
                         ids=["gpt2", "llama"])
def test_parameter_split_matches_the_built_model(arch):
    from components.model.gpt import build_model, parameter_count
    config = build_config("tiny", overrides=["model.tie_embeddings=false", *arch])
    embedding, block, final = memory.parameter_split(config)
    model = build_model(config.model, config.data.seq_len, vocab_size=VOCAB_SIZE)
    assert embedding + config.model.n_layer * block + final == parameter_count(model)


@pytest.mark.parametrize("layers, stages, expected", [(24, 8, [3] * 8), (26, 8, [4, 4] + [3] * 6),
                                                      (4, 4, [1, 1, 1, 1])])
def test_stage_blocks_are_contiguous_and_complete(layers, stages, expected):
    assert memory.stage_blocks(layers, stages) == expected


def test_sharded_state_is_one_over_r():
    plain = build_config("xl")
    sharded = build_config("xl", overrides=["train.shard_optimizer_state=true"])
    n = 1_000_000
    a, b = memory.estimate(plain, n, 8), memory.estimate(sharded, n, 8)
    assert a.optimizer_state == 8 * n and b.optimizer_state == n
    assert (a.parameters, a.gradients, a.activations_per_micro_batch) == (
        b.parameters, b.gradients, b.activations_per_micro_batch)


def test_pipeline_puts_the_busiest_stage_on_each_device():
    config = build_config("xl", overrides=["runtime.strategy=one_device", "runtime.pipeline_stages=8"])
    embedding, block, final = memory.parameter_split(config)
    n = embedding + 24 * block + final
    e = memory.estimate(config, n, 1)
    assert e.parameters == pytest.approx(4 * (embedding + 3 * block))   # stage 0 is the busiest
    assert e.gradients == pytest.approx(2 * e.parameters)
    t, T = config.train, config.data.seq_len
    b = t.global_batch_size // t.accumulation_steps
    assert e.activations_per_micro_batch > t.accumulation_steps * b * T * 12 * 32000   # M logits


def test_fit_table_names_every_layout():
    lines = memory.fit_table(build_config("xl"), 8, 80)
    assert "1.12B parameters on 8 devices of 80 GiB" in lines[0]
    assert any(line.startswith("mirrored + shard_optimizer_state ") and line.endswith(" fits")
               for line in lines)
    assert any(line.startswith("pipeline_stages=8") for line in lines)
    assert math.isclose(len(lines), 1 + 4 + 3)
