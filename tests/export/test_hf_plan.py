"""An `hf:DIR` warm-start source is refused early: the safetensors header's tensor shapes are
compared with the shapes its config.json implies before any model is built (no tensor read),
and a directory that does not exist, or lacks config.json, model.safetensors or a tokenizer file
the config's tokenizer needs, is refused when the run starts (config and headers only, before
the lock, the metadata store and any stage), not in the Trainer after the data stages."""

import os

import numpy as np
import pytest

from components.serving.hf import (CONFIG_FILE, SPM_FILE, TOKENIZER_FILE, WEIGHTS_FILE,
                                   HFFormatError, HFShapeMismatch, MissingTokenizerFile,
                                   directory, mapping)
from components.tokenizer.byte_level import ByteTokenizer
from components.training import hf_source
from tests.support.hf_models import ARCHS, export, qwen3_model, tiny_run_config
from tests.export.conftest import tiny_model


@pytest.fixture(scope="module")
def models():
    return {"gpt2": tiny_model(arch="gpt2"), "llama": tiny_model(arch="llama"), "qwen3": qwen3_model()}


@pytest.mark.parametrize("arch", ARCHS)
def test_the_shapes_a_config_implies_are_the_built_models(models, arch):
    model = models[arch]
    settings = mapping.model_settings(mapping.hf_config(model, ByteTokenizer().special_ids()), "x")
    assert mapping.settings_shapes(settings) == mapping.expected_shapes(model)


def rewrite_tensors(hf_dir: str, change) -> None:
    """model.safetensors rewritten with change(tensors) (config.json left as it is)."""
    from safetensors.numpy import save_file
    tensors = change(directory.read_tensors(hf_dir))
    save_file(tensors, os.path.join(hf_dir, WEIGHTS_FILE), metadata={"format": "pt"})


def no_tensor_read(monkeypatch):
    def refuse(*_):
        raise AssertionError("a tensor was read")
    monkeypatch.setattr(directory, "read_tensors", refuse)


@pytest.mark.parametrize("change, named", [
    (lambda t: dict(t, **{"model.layers.1.self_attn.q_proj.weight":
                          t["model.layers.1.self_attn.q_proj.weight"][:16]}),
     r"model.layers.1.self_attn.q_proj.weight has shape \[16, 32\] but .* needs \[32, 32\]"),
    (lambda t: {k: v for k, v in t.items() if k != "lm_head.weight"}, r"no tensor lm_head.weight"),
    (lambda t: dict(t, **{"model.layers.2.input_layernorm.weight": np.ones(32, np.float32)}),
     r"no place for tensor model.layers.2.input_layernorm.weight"),
])
def test_a_header_that_disagrees_with_its_config_is_named_before_any_tensor_is_read(
        models, tmp_path, monkeypatch, change, named):
    model = models["qwen3"]
    hf_dir = export(model, tmp_path)
    rewrite_tensors(hf_dir, change)
    no_tensor_read(monkeypatch)
    with pytest.raises(HFShapeMismatch, match=named):
        hf_source.check_hf_source(tiny_run_config(model), hf_dir, ByteTokenizer())
    with pytest.raises(HFShapeMismatch, match=f"{WEIGHTS_FILE} against its {CONFIG_FILE}"):
        hf_source.check_init_from(plan_config(model, hf_dir))


def plan_config(model, hf_dir: str, **data):
    from components import config as config_lib
    return config_lib.merge(tiny_run_config(model), {"train": {"init_from": f"hf:{hf_dir}"},
                                                     "data": data})


def test_a_good_directory_passes_at_plan_time_without_reading_tensors(models, tmp_path, monkeypatch):
    model = models["llama"]
    hf_dir = export(model, tmp_path)
    no_tensor_read(monkeypatch)
    assert hf_source.check_init_from(plan_config(model, hf_dir)) is None
    assert hf_source.check_init_from(tiny_run_config(model)) is None    # init_from=none


@pytest.mark.parametrize("remove, error, named", [
    (None, HFFormatError, "does not exist"),
    (CONFIG_FILE, HFFormatError, f"{CONFIG_FILE} does not exist"),
    (WEIGHTS_FILE, HFFormatError, f"{WEIGHTS_FILE} does not exist"),
    (TOKENIZER_FILE, MissingTokenizerFile, f"no {TOKENIZER_FILE}"),
])
def test_a_missing_directory_or_file_is_refused_at_plan_time(models, tmp_path, remove, error, named):
    model = models["gpt2"]
    hf_dir = export(model, tmp_path)
    if remove is None:
        hf_dir = str(tmp_path / "never-written")
    else:
        os.remove(os.path.join(hf_dir, remove))
    with pytest.raises(error, match=named):
        hf_source.check_init_from(plan_config(model, hf_dir))


def test_a_sentencepiece_config_needs_tokenizer_model(models, tmp_path):
    """A SentencePiece run's tokenizer is trained in the run: at plan time its files must be
    there (their content is compared in the Trainer)."""
    from components.model.gpt import build_model
    from tests.export.conftest import CONTEXT, tiny_model_config
    model = build_model(tiny_model_config("llama"), CONTEXT, vocab_size=400)
    hf_dir = export(model, tmp_path)                 # byte tokenizer files, no tokenizer.model
    config = plan_config(model, hf_dir, tokenizer="sentencepiece", vocab_size=400)
    with pytest.raises(MissingTokenizerFile, match=SPM_FILE):
        hf_source.check_init_from(config)
    open(os.path.join(hf_dir, SPM_FILE), "wb").write(b"x")
    assert hf_source.check_init_from(config) is None


def test_bigtrain_run_refuses_a_missing_hf_dir_before_any_stage(tmp_path, capsys):
    from runners.cli import app as cli
    home, missing = tmp_path / "home", tmp_path / "no-such-export"
    code = cli.main(["run", "--home", str(home), "--preset", "tiny",
                     "--set", f"train.init_from=hf:{missing}"])
    err = capsys.readouterr().err
    assert code == HFFormatError.exit_code, err
    assert f"{missing} does not exist" in err and "Traceback" not in err, err
    # no lock, store, run folder or pipeline root: nothing ran, and the home the refused run
    # created is gone again (runners/local/run.py leaves a home as it found it)
    assert not home.exists()


def test_the_pipeline_refuses_it_too(models, tmp_path):
    """Every runner (Kubeflow and Airflow compile through create_pipeline) checks it."""
    from pipeline.pipeline import warm_start_parent
    model = models["gpt2"]
    hf_dir = export(model, tmp_path)
    os.remove(os.path.join(hf_dir, TOKENIZER_FILE))
    with pytest.raises(MissingTokenizerFile, match=TOKENIZER_FILE):
        warm_start_parent(plan_config(model, hf_dir))
