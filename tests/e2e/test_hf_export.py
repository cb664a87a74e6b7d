"""A model of a real pipeline run (the session's data_run, pushed) leaves in the Hugging Face
layout: `bigtrain export hf` by run id and by pushed version, keras-hub's logits equal the pushed
SavedModel's (what is served) within 1e-4, the card carries the run's lineage, and a fine-tune
from the exported directory starts from the same weights (round trip exact)."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from components.serving.hf import CARD_FILE, CONFIG_FILE
from runners.cli import app as cli
from tests.support.hf_models import keras_hub_backbone, keras_hub_logits
from tests.support.texts import TEXTS

pytestmark = pytest.mark.slow


def fixed_batch(length: int) -> np.ndarray:
    rows = [[257] + list(t[:length - 1]) for t in TEXTS]
    width = min(len(r) for r in rows)
    return np.array([r[:width] for r in rows], np.int32)


@pytest.fixture(scope="module")
def exported(data_run, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("hf") / "by-run")
    assert cli.main(["export", "hf", data_run.run_id, "--home", data_run.home, "--out", out]) == 0
    return out


def test_keras_hub_matches_the_pushed_savedmodel(data_run, exported):
    versions = sorted(data_run.served_after)
    pushed = tf.saved_model.load(os.path.join(data_run.home, "serving", "gpt", str(versions[-1])))
    config = json.load(open(os.path.join(exported, CONFIG_FILE)))
    batch = fixed_batch(config.get("n_positions") or config["max_position_embeddings"])
    served = pushed.signatures["token_logits"](input_ids=tf.constant(batch))["logits"].numpy()
    theirs = keras_hub_logits(keras_hub_backbone(exported), batch)
    assert np.abs(theirs - served).max() < 1e-4


def test_the_card_carries_the_runs_lineage(data_run, exported):
    card = open(os.path.join(exported, CARD_FILE)).read()
    assert data_run.run_id in card
    assert f"| pushed version | {sorted(data_run.served_after)[-1]} |" in card
    assert "documents" in card and "zlib -9" in card and "`eval_bits_per_byte`" in card
    # the whole-document standing, read from the run's ModelEvaluation (not the window sample)
    assert "- whole documents" in card and "eval documents" in card and "concatenated" in card
    assert "- held-out bigtrain_code" in card and "- code tasks" in card
    assert "evaluator_heldout_bigtrain_code_document_bits_per_byte" in card   # the figures table


def test_export_by_pushed_version_gives_the_same_weights(data_run, exported, tmp_path):
    version = str(sorted(data_run.served_after)[-1])
    out = str(tmp_path / "by-version")
    assert cli.main(["export", "hf", version, "--home", data_run.home, "--out", out]) == 0
    for name in ("model.safetensors", CONFIG_FILE, "tokenizer.json"):
        assert open(os.path.join(out, name), "rb").read() == open(os.path.join(exported, name), "rb").read()
    card = open(os.path.join(out, CARD_FILE)).read()   # the run found through the push record
    assert f"| run id | {data_run.run_id} |" in card and f"| pushed version | {version} |" in card
    assert "documents" in card and "zlib -9" in card and "`documents_packed`" in card


def test_a_fine_tune_from_the_export_starts_from_the_same_weights(data_run, exported):
    from components.model.gpt import build_model
    from components.serving.hf.source import load_exported
    from components.training import warm_start
    from pipeline.lineage.card_facts import card_facts
    from pipeline.lineage.store import Lineage
    model_uri = card_facts(Lineage(data_run.store()), data_run.run_id)["model_uri"]
    trained, _, info = load_exported(model_uri)
    fresh = build_model(_model_config(info), int(info["context_length"]),
                        vocab_size=int(info["vocab_size"]))
    warm_start.preparer(f"hf:{exported}", (), {})(fresh)
    for ours, back in zip(trained.get_weights(), fresh.get_weights()):
        np.testing.assert_array_equal(ours, back)


def _model_config(info):
    from components import config as config_lib
    return config_lib.from_dict(config_lib.ModelConfig, info["config"]["model"])


@pytest.fixture(scope="module")
def hf_fine_tune(data_run, exported, tmp_path_factory, session_capsys):
    """A second home whose Trainer starts from the exported directory, pushing with
    push.formats [hf] (the Pusher's executor writes <version>/hf/). The float model only, judged
    on 4 eval batches: the int8 and TFLite variants and 50 batches are the chain's to test (they
    took ~60 s of this run)."""
    from tests.e2e.conftest import base_args
    from tests.support.pipeline_run import run_cli
    home = str(tmp_path_factory.mktemp("hf_home"))
    return run_cli(session_capsys, home, *base_args(data_run.corpus),
                   "--set", "train.train_steps=2", "--set", "train.warmup_steps=0",
                   "--set", f"train.init_from=hf:{exported}", "--set", "push.formats=[hf]",
                   "--set", "export.quantize=[]", "--set", "eval.max_batches=4",
                   "--set", "eval.sets=[]")   # held-out set and code tasks: the chain's


def test_a_pipeline_fine_tune_from_hf_records_the_source_and_its_digest(hf_fine_tune, exported):
    from components.serving.hf.directory import directory_digest
    assert hf_fine_tune.exit_code == 0, hf_fine_tune.stderr[-2000:]
    store = hf_fine_tune.store()
    models = store.get_artifacts_by_type("Model")
    trained = [m for m in models if "init_from_hf_digest" in m.custom_properties]
    assert len(trained) == 1
    props = trained[0].custom_properties
    assert props["init_from_hf_digest"].string_value == directory_digest(exported)
    assert props["init_from_hf_dir"].string_value == exported
    assert props["first_step_loss"].double_value < 3.0      # random weights: ln 259 = 5.56
    imported = [m for m in models if "hf_digest" in m.custom_properties]
    assert [m.custom_properties["hf_digest"].string_value for m in imported] == [directory_digest(exported)]


def test_the_pusher_writes_hf_inside_the_pushed_version(hf_fine_tune):
    from components.push.layout import HF_DIR, served_versions
    base = os.path.join(hf_fine_tune.home, "serving", "gpt")
    versions = served_versions(base)
    assert len(versions) == 1, hf_fine_tune.stdout[-2000:]
    folder = os.path.join(base, str(versions[0]), HF_DIR)
    assert sorted(os.listdir(folder)) == ["README.md", "config.json", "generation_config.json",
                                          "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    card = open(os.path.join(folder, CARD_FILE)).read()
    assert f"| pushed version | {versions[0]} |" in card and hf_fine_tune.run_id in card
    # The data it was trained on, from its MODEL_INFO (the Trainer's Examples), and the figures.
    assert "## Data sources\n\nnot recorded" not in card and "`documents_packed`" in card
    assert "zlib -9" in card and "| input fingerprint | not recorded |" not in card
