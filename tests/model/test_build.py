"""Building a model creates its variables from shapes (GPT.build and each layer's build), not by
tracing call(): Keras builds a layer without a build method by running its call() on symbolic
inputs, and each nested layer again on its first call inside that trace, which made the tiny
preset's build_model cost 2.0-2.4 CPU-s instead of ~0.25 (docs/benchmarks.md, "Set-up and
tests", 2026-11-29). Every training run, serving copy, variant and export builds one.

What is counted: how often each layer's call() runs while build_model builds (its one eager
forward pass: once; GPT.build removed, each runs twice), and the variables build() alone creates
(a block's or an attention layer's build removed: Keras marks it built without variables).
The weights a build makes are checked elsewhere against independent references (the
hand-counted parameter totals of test_model_parallel, the transformers logits of
tests/export/test_hf_transformers.py); on 2026-11-29 the explicit builds gave bit-identical
weights, logits and stage devices to the traced ones for both archs, GQA with QK-norm, untied
heads, float32 and mixed_bfloat16."""

import dataclasses
import functools

import pytest

from components.config.presets import tiny
from components.model import gpt, llama

LAYERS = {"gpt2": (gpt.GPT, gpt.Block, gpt.CausalSelfAttention),
          "llama": (gpt.GPT, llama.LlamaBlock, llama.GroupedQueryAttention)}


def _counted(call, name: str, calls: dict):
    @functools.wraps(call)    # Keras reads call()'s signature for the shapes it builds from
    def counted(self, *args, **kwargs):
        calls[name] = calls.get(name, 0) + 1
        return call(self, *args, **kwargs)
    return counted


@pytest.mark.parametrize("arch", sorted(LAYERS))
def test_build_model_runs_each_call_once(arch, monkeypatch):
    calls = {}
    for cls in LAYERS[arch]:
        monkeypatch.setattr(cls, "call", _counted(cls.call, cls.__name__, calls))
    config = dataclasses.replace(tiny().model, arch=arch, n_layer=2, n_head=4,
                                 n_kv_head=2 if arch == "llama" else 0,
                                 qk_norm=arch == "llama", tie_embeddings=False)
    model = gpt.build_model(config, 16, "float32", vocab_size=97)
    blocks, attention = LAYERS[arch][1].__name__, LAYERS[arch][2].__name__
    assert calls == {"GPT": 1, blocks: 2, attention: 2}, calls     # 2 blocks, one forward pass
    assert model.built and all(block.built for block in model.blocks)


# Counted by hand (V = 97, C = 32, 4 heads of D = 8, T = 16, untied head, 2 blocks):
#   llama: qkv C x (4 D + 2 x 2 D) = 2,048, proj 1,024, fc C x 2F = 6,144 and fc_out F x C = 3,072
#          (F = 2/3 x 4 x 32 rounded up to 32 = 96), ln1 + ln2 64, q_norm + k_norm 2 D = 16:
#          12,368 a block; + embedding 3,104 + ln_f 32 + head 3,104 = 30,976
#   gpt2:  ln1 64, qkv 3C^2 + 3C = 3,168, proj 1,056, ln2 64, fc 4C^2 + 4C = 4,224, fc_out 4,128:
#          12,704 a block; + embedding 3,104 + positions T x C = 512 + ln_f 64 + head 3,104 = 32,192
PARAMETERS = {"llama": 30_976, "gpt2": 32_192}


def _unbuilt(arch: str) -> gpt.GPT:
    """The model PARAMETERS counts, not yet built."""
    return gpt.GPT(context_length=16, n_layer=2, n_head=4, d_model=32, vocab_size=97, arch=arch,
                   mlp_ratio=4, n_kv_head=2 if arch == "llama" else 0, qk_norm=arch == "llama",
                   tie_embeddings=False)


@pytest.mark.parametrize("arch", sorted(LAYERS))
def test_build_alone_creates_every_variable(arch, recwarn):
    """model.build(shape) with no call: every variable exists, no layer left to build lazily.
    Caught: a block's or an attention layer's build removed (Keras' default build then marks the
    layer built without variables and warns of its unbuilt state; the count comes out short)."""
    model = _unbuilt(arch)
    model.build((None, 16))
    assert gpt.parameter_count(model) == PARAMETERS[arch]
    assert not [w for w in recwarn if "unbuilt state" in str(w.message)], [str(w.message) for w in recwarn]


def _saved_model_walk(model) -> dict[str, int]:
    """The reference: the object graph as tf.saved_model.save walks it (every attribute read)."""
    import keras
    import tensorflow as tf
    out, seen = {}, set()

    def walk(obj, prefix):
        if id(obj) not in seen:
            seen.add(id(obj))
            if isinstance(obj, (keras.Variable, tf.Variable)):
                out[prefix] = id(obj)
                return
            for name, child in tf.train.TrackableView.children(obj, save_type="savedmodel").items():
                walk(child, f"{prefix}/{name}")
    walk(model, "model")
    return out


@pytest.mark.parametrize("arch", sorted(LAYERS))
def test_weights_walk_names_what_saved_model_names(arch):
    """components/model/weights.variable_paths walks the checkpoint view of the object graph (the
    SavedModel view traces the whole model on each walk): the same path for the same variable,
    every variable once. Caught: GPT's checkpoint children without its blocks (the block
    variables missing), a walk that stops at the first level."""
    from components.model.weights import variable_paths
    model = _unbuilt(arch)
    model.build((None, 16))
    ours = {path: id(variable) for path, variable in variable_paths(model).items()}
    assert ours == _saved_model_walk(model)
    assert len(ours) == len(model.weights) and "model/blocks/1/fc_out/_kernel" in ours
