"""The Hugging Face layout, checked by loaders we did not write: keras-hub's transformers
converters (Keras 3, TensorFlow backend) load the exported directory and give our logits within
1e-4 (float32, a fixed batch) and our greedy generations; the `safetensors` library reads the
header metadata and dtypes; the export -> warm start round trip is exact; each bad source is its
named error before any model is built. (Tokenizers: test_hf_tokenizer.py.)

keras-hub's converters drop two settings our config.json carries, so the tests hand them over
from our own config.json (the value checked is still the one we wrote): convert_llama3 omits
rms_norm_eps (Llama3Backbone defaults to 1e-6, ours is model.norm_eps), and GPT2Backbone always
uses the tanh GELU (transformers' "gelu_new") while ours, and config.json's activation_function
"gelu", is the exact erf GELU. And its Qwen3 decoder does not pass the epsilon on to the QK-norms
(they keep 1e-5; transformers' Qwen3 uses rms_norm_eps there): set from config.json too."""

import json
import os

import keras_hub
import numpy as np
import pytest

from components.config import ModelConfig
from components.model.gpt import build_model
from components.serving.hf import (CONFIG_FILE, GENERATION_FILE, TOKENIZER_FILE, WEIGHTS_FILE, CheckpointTooLarge,
                                   HFShapeMismatch, MissingTokenizerFile, UnsupportedHFClass,
                                   directory, mapping)
from components.tokenizer.byte_level import VOCAB_SIZE, ByteTokenizer
from tests.export.conftest import CONTEXT, tiny_model, trained_tiny_model
from tests.support.hf_models import (ARCHS, BATCH, export, interleave_rotary, keras_hub_backbone,
                                     keras_hub_logits, qwen3_model, tiny_run_config)


@pytest.fixture(scope="module")
def trained():
    """Weights at a trained model's scale for each exported class."""
    return {"gpt2": trained_tiny_model("gpt2"), "llama": trained_tiny_model("llama"),
            "qwen3": qwen3_model()}


@pytest.mark.parametrize("name", ARCHS)
def test_keras_hub_logits_equal_ours(trained, tmp_path, name):
    model = trained[name]
    hf_dir = export(model, tmp_path)
    backbone = keras_hub_backbone(hf_dir)
    expected_class = {"gpt2": "GPT2Backbone", "llama": "Llama3Backbone", "qwen3": "Qwen3Backbone"}
    assert type(backbone).__name__ == expected_class[name]
    theirs, ours = keras_hub_logits(backbone, BATCH), model(BATCH).numpy()
    assert np.abs(theirs - ours).max() < 1e-4
    assert np.abs(ours).max() > 1.0          # logits of a size where a wrong mapping shows


def our_greedy(model, prompt: list[int], steps: int) -> list[int]:
    """Reference: argmax of our Keras model, no cache, the whole vocabulary (as keras-hub's)."""
    ids = list(prompt)
    for _ in range(steps):
        ids.append(int(np.argmax(model(np.array([ids], np.int32)).numpy()[0, -1])))
    return ids


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_keras_hub_greedy_generation_equals_ours(tmp_path, arch):
    model = tiny_model(arch=arch)   # N(0, 0.3) weights: clear argmax margins
    backbone = keras_hub_backbone(export(model, tmp_path))
    task = (keras_hub.models.GPT2CausalLM if arch == "gpt2" else keras_hub.models.Llama3CausalLM)(
        backbone=backbone, preprocessor=None)
    task.compile(sampler="greedy")
    prompts = [[257, 104, 101, 108, 108], [257, 123, 34, 97, 34]]
    ids, mask = np.zeros((2, CONTEXT), np.int32), np.zeros((2, CONTEXT), bool)
    for row, prompt in enumerate(prompts):
        ids[row, :len(prompt)], mask[row, :len(prompt)] = prompt, True
    out = task.generate({"token_ids": ids, "padding_mask": mask}, stop_token_ids=None)
    theirs = np.asarray(out["token_ids"]).tolist()
    assert theirs == [our_greedy(model, p, CONTEXT - len(p)) for p in prompts]
    assert len(set(theirs[0][5:])) > 1       # a generation, not one token repeated


def test_safetensors_header_metadata_and_dtypes(trained, tmp_path):
    from safetensors import safe_open
    model = trained["llama"]
    for dtype, code in (("float32", "F32"), ("bfloat16", "BF16")):
        hf_dir = export(model, tmp_path, dtype, dtype=dtype)
        with safe_open(os.path.join(hf_dir, WEIGHTS_FILE), framework="np") as f:
            assert f.metadata() == {"format": "pt"}
            assert {f.get_slice(k).get_dtype() for k in f.keys()} == {code}
            assert sorted(f.keys()) == sorted(mapping.expected_shapes(model))
        assert json.load(open(os.path.join(hf_dir, CONFIG_FILE)))["torch_dtype"] == dtype


def test_generation_config_json_states_our_decoding(tmp_path):
    """Our serving's rule for every generate: BOS starts, EOS stops, PAD pads, and neither PAD
    nor BOS is ever chosen (decoding.ban); greedy unless asked (that transformers' generate reads
    it: tests/export/test_hf_transformers.py)."""
    hf_dir = export(tiny_model(arch="gpt2"), tmp_path)
    assert json.load(open(os.path.join(hf_dir, GENERATION_FILE))) == {
        "bos_token_id": 257, "eos_token_id": 258, "pad_token_id": 256,
        "suppress_tokens": [256, 257], "do_sample": False}
    config = json.load(open(os.path.join(hf_dir, CONFIG_FILE)))
    assert (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"]) == (257, 258, 256)


def bf16_round(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 -> float32, round to nearest even, by bit arithmetic (independent of
    ml_dtypes, which the writer uses)."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("name", ARCHS)
def test_round_trip_export_then_warm_start_is_exact(trained, tmp_path, name):
    from components.training import warm_start
    model = trained[name]
    hf_dir = export(model, tmp_path)
    fresh = build_model(model_config_of(model), CONTEXT, vocab_size=VOCAB_SIZE)
    report = {}
    warm_start.preparer(f"hf:{hf_dir}", (), report)(fresh)
    assert report["warm_start_variables"] == len(fresh.weights)
    for ours, back in zip(model.get_weights(), fresh.get_weights()):
        np.testing.assert_array_equal(ours, back)
    half = build_model(model_config_of(model), CONTEXT, vocab_size=VOCAB_SIZE)
    warm_start.load_hf(half, export(model, tmp_path, "bf16", dtype="bfloat16"))
    for ours, back in zip(model.get_weights(), half.get_weights()):
        np.testing.assert_array_equal(bf16_round(ours), back)


def model_config_of(model) -> ModelConfig:
    """The ModelConfig the model's config.json stands for (the inverse mapping)."""
    settings = mapping.model_settings(mapping.hf_config(model, ByteTokenizer().special_ids()), "test")
    settings.pop("vocab_size"), settings.pop("context_length")
    return ModelConfig(**settings)


def test_a_wrong_rotary_pairing_is_caught(trained, tmp_path, monkeypatch):
    """The logits test can fail: with q/k rows permuted for the interleaved convention,
    keras-hub's logits move far past 1e-4."""
    model = trained["llama"]
    original = mapping.hf_tensors
    monkeypatch.setattr(mapping, "hf_tensors", lambda m: interleave_rotary(original(m), m))
    theirs = keras_hub_logits(keras_hub_backbone(export(model, tmp_path)), BATCH)
    assert np.abs(theirs - model(BATCH).numpy()).max() > 1e-2


def edit_config(hf_dir: str, **changes) -> None:
    path = os.path.join(hf_dir, CONFIG_FILE)
    config = json.load(open(path))
    config.update(changes)
    json.dump(config, open(path, "w"))


def test_a_good_source_passes_and_lineage_gets_its_digest(trained, tmp_path):
    from components.training.warm_start import check_hf_source
    model = trained["llama"]
    hf_dir = export(model, tmp_path)
    facts = check_hf_source(tiny_run_config(model), hf_dir, ByteTokenizer())
    assert facts["init_from_hf_class"] == "LlamaForCausalLM"
    assert facts["init_from_hf_digest"] == directory.directory_digest(hf_dir)
    edit_config(hf_dir, initializer_range=0.03)   # any byte changes the digest
    assert directory.directory_digest(hf_dir) != facts["init_from_hf_digest"]


@pytest.mark.parametrize("breakage, error, named", [
    ({"architectures": ["MistralForCausalLM"]}, UnsupportedHFClass, "MistralForCausalLM"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, UnsupportedHFClass, "rope_scaling"),
    ({"hidden_act": "gelu"}, UnsupportedHFClass, "hidden_act"),
    ({"num_key_value_heads": 2}, HFShapeMismatch, "model.n_kv_head"),
    ({"rope_theta": 500000.0}, HFShapeMismatch, "model.rope_theta"),
])
def test_a_bad_config_is_a_named_error_before_training(trained, tmp_path, breakage, error, named):
    from components.training.warm_start import check_hf_source
    model = trained["llama"]
    hf_dir = export(model, tmp_path)
    edit_config(hf_dir, **breakage)
    with pytest.raises(error, match=named):
        check_hf_source(tiny_run_config(model), hf_dir, ByteTokenizer())


def test_a_tensor_of_another_shape_is_a_shape_mismatch(trained, tmp_path):
    from components.training.warm_start import load_hf
    hf_dir = export(trained["gpt2"], tmp_path)
    wider = build_model(ModelConfig(arch="gpt2", n_layer=2, n_head=2, d_model=64), CONTEXT,
                        vocab_size=VOCAB_SIZE)
    with pytest.raises(HFShapeMismatch, match=r"transformer.wte.weight has shape \[259, 32\]"):
        load_hf(wider, hf_dir)


def test_a_missing_tokenizer_file_is_named(trained, tmp_path):
    from components.training.warm_start import check_hf_source
    model = trained["gpt2"]
    hf_dir = export(model, tmp_path)
    os.remove(os.path.join(hf_dir, TOKENIZER_FILE))
    with pytest.raises(MissingTokenizerFile, match=TOKENIZER_FILE):
        check_hf_source(tiny_run_config(model), hf_dir, ByteTokenizer())


def test_a_checkpoint_beyond_the_memory_estimate_is_named(trained, tmp_path):
    from components.training.warm_start import check_hf_source
    model = trained["gpt2"]
    hf_dir = export(model, tmp_path)
    config = tiny_run_config(model, runtime={"device_memory_gb": 0.0001})  # ~100 KiB
    with pytest.raises(CheckpointTooLarge, match="runtime.device_memory_gb"):
        check_hf_source(config, hf_dir, ByteTokenizer())


def test_the_imported_directory_is_the_one_read():
    """The pipeline imports hf:DIR as an artifact (absolute); run_fn reads what was imported."""
    from components.training.warm_start import hf_directory, resolve_source
    assert hf_directory("hf:rel/dir", None) == "rel/dir"
    assert hf_directory("hf:rel/dir", "/abs/rel/dir/Format-Serving") == "/abs/rel/dir"
    assert hf_directory("hf:x", "gs://b/x") == "gs://b/x"
    assert resolve_source("hf:rel/dir", "/abs/rel/dir/Format-Serving") == "hf:/abs/rel/dir"
    assert hf_directory("latest_blessed", "/m/Format-Serving") is None
