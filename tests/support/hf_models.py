"""Small models on both sides of the Hugging Face export: the tiny run config, exporting it, Keras
Hub's backbones and their logits, the Qwen3 model, the rotary layout's interleave."""

import json
import os

import keras
import keras_hub
import numpy as np

from components.config import ModelConfig
from components.model.gpt import build_model
from components.serving.hf import CONFIG_FILE, directory, mapping
from components.tokenizer.byte_level import VOCAB_SIZE, ByteTokenizer
from tests.export.conftest import CONTEXT


BATCH = np.array([[257] + list(b"def f(x):\n  ret"), [257] + list(b"{\"a\": [1, 2.5],")], np.int32)


ARCHS = ("gpt2", "llama", "qwen3")


def qwen3_model(seed: int = 0):
    """The llama block with QK-norm and an untied head (exported as Qwen3ForCausalLM), weights
    ~N(0, 0.3) (norm scales too: a dropped or swapped QK-norm would show)."""
    config = ModelConfig(arch="llama", n_layer=2, n_head=2, d_model=32, n_kv_head=1, qk_norm=True,
                         tie_embeddings=False, norm_eps=1e-6, rope_theta=5000.0)
    model = build_model(config, CONTEXT, vocab_size=VOCAB_SIZE)
    rng = np.random.RandomState(seed)
    model.set_weights([rng.normal(0, 0.3, w.shape).astype("float32") for w in model.get_weights()])
    return model


def export(model, root, name="hf", **kwargs) -> str:
    out = os.path.join(str(root), name)
    directory.write_hf_directory(model, ByteTokenizer(), out, **kwargs)
    return out


def keras_hub_backbone(hf_dir: str):
    """keras-hub's own loader on our directory (its dispatch on config.json's model_type)."""
    config = json.load(open(os.path.join(hf_dir, CONFIG_FILE)))
    extra = {"layer_norm_epsilon": config["rms_norm_eps"]} if config["model_type"] == "llama" else {}
    backbone = keras_hub.models.Backbone.from_preset(hf_dir, **extra)
    if config["model_type"] == "gpt2":
        assert config["activation_function"] == "gelu"   # exact GELU, as ours
        for layer in backbone.transformer_layers:
            layer._feedforward_intermediate_dense.activation = keras.activations.gelu
    if config["model_type"] == "qwen3":
        for layer in backbone.transformer_layers:
            attention = layer._self_attention_layer
            attention._query_dense_layer_norm.epsilon = config["rms_norm_eps"]
            attention._key_dense_layer_norm.epsilon = config["rms_norm_eps"]
    return backbone


def keras_hub_logits(backbone, ids) -> np.ndarray:
    hidden = backbone({"token_ids": ids, "padding_mask": np.ones_like(ids)})
    return np.asarray(backbone.token_embedding(hidden, reverse=True))


def interleave_rotary(tensors: dict, model) -> dict:
    """The mutation: q_proj/k_proj rows of each head reordered for the interleaved (GPT-J/Meta)
    rotary pairing, as a converter would that took ours for the other convention."""
    attn = model.blocks[0].attn
    half = attn.head_dim // 2
    order = np.stack([np.arange(half), np.arange(half) + half], axis=1).reshape(-1)
    out = dict(tensors)
    for name, values in tensors.items():
        if name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = values.reshape(-1, attn.head_dim, values.shape[-1])
            out[name] = np.ascontiguousarray(heads[:, order].reshape(values.shape))
    return out


def tiny_run_config(model, **overrides):
    """A run config whose model is `model`'s (bytes, data.seq_len = CONTEXT)."""
    from components import config as config_lib
    settings = mapping.model_settings(mapping.hf_config(model, ByteTokenizer().special_ids()), "test")
    settings.pop("vocab_size"), settings.pop("context_length")
    return config_lib.merge(config_lib.build_config("tiny"), {
        "model": settings, "data": {"seq_len": CONTEXT}, "runtime": {"device_memory_gb": 64.0},
        **overrides})
