"""`bigtrain export hf` from a Model artifact folder and from a pushed version, and push.formats
[hf]: the Pusher writes <version>/hf/ inside the staged version (never half-visible: a failing
writer leaves no version and no staging folder). keras-hub loads what the CLI wrote with our
logits; a SentencePiece model is read back from the SavedModel graph that embeds it."""

import json
import os

import numpy as np
import pytest

from components import config as config_lib
from components.serving.hf import CARD_FILE, CONFIG_FILE, WEIGHTS_FILE
from components.tokenizer.byte_level import ByteTokenizer
from runners.cli import app as cli
from tests.export.conftest import CONTEXT, tiny_model_config, trained_tiny_model
from tests.support.hf_models import BATCH, keras_hub_backbone, keras_hub_logits

pytestmark = pytest.mark.slow   # exports SavedModels (signature tracing: ~20 s each)

FIGURES = {"eval_bits_per_byte": 2.125, "zlib9_bits_per_byte": 2.625,
           "lzma9_bits_per_byte": 2.375, "eval_loss": 1.47, "steps": 200}
# What the Trainer puts into MODEL_INFO from its Examples (run_fn.examples_facts).
DATA = {"data_sources": [{"input": "/data/stdlib/*.py", "format": "text", "files_listed": 7}],
        "data_counts": {"documents_packed": 41}, "input_fingerprint": "fp-model"}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A Model artifact folder as the Trainer writes it (float SavedModel + named weights)."""
    from components.serving.variants import export_variants
    model = trained_tiny_model("llama")   # the session's trained llama (test_variants, test_hf)
    root = str(tmp_path_factory.mktemp("model"))
    config = {"model": config_lib.to_dict(tiny_model_config("llama")), "data": {"seq_len": CONTEXT}}
    export_variants(model, tiny_model_config("llama"), CONTEXT, root, tokenizer=ByteTokenizer(),
                    quantize=(), metadata={"config": config, "training": FIGURES, "data": DATA})
    return model, root


def test_cli_exports_a_model_folder_that_keras_hub_loads(model_dir, tmp_path):
    model, root = model_dir
    out = str(tmp_path / "hf")
    assert cli.main(["export", "hf", os.path.join(root, "Format-Serving"), "--out", out]) == 0
    logits = keras_hub_logits(keras_hub_backbone(out), BATCH)
    assert np.abs(logits - model(BATCH).numpy()).max() < 1e-4
    card = open(os.path.join(out, CARD_FILE)).read()
    assert "zlib -9 2.625" in card and "lzma -9 2.375" in card and "this model 2.125" in card
    assert "`model.n_kv_head` | 1" in card


def test_cli_bfloat16(model_dir, tmp_path):
    from safetensors import safe_open
    out = str(tmp_path / "hf16")
    assert cli.main(["export", "hf", model_dir[1], "--out", out, "--dtype", "bfloat16"]) == 0
    with safe_open(os.path.join(out, WEIGHTS_FILE), framework="np") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"BF16"}


def test_push_formats_hf_writes_inside_the_version(model_dir, tmp_path):
    from components.push.layout import HF_DIR, served_versions
    from components.push.push import format_writers, push_model
    model, root = model_dir
    base = str(tmp_path / "serving" / "gpt")
    result = push_model(os.path.join(root, "Format-Serving"), base,
                        record={"model_uri": root}, extras=format_writers(["hf"], root))
    assert served_versions(base) == [result.version]
    card = open(os.path.join(result.path, HF_DIR, CARD_FILE)).read()
    assert f"| pushed version | {result.version} |" in card
    assert json.load(open(os.path.join(result.path, HF_DIR, CONFIG_FILE)))["architectures"] == ["LlamaForCausalLM"]
    assert set(os.listdir(base)) == {".claims", "batching_parameters", "models.config", str(result.version)}
    # The CLI from the pushed version: the push record names the model.
    out = str(tmp_path / "from-version")
    assert cli.main(["export", "hf", result.path, "--out", out]) == 0
    assert f"| pushed version | {result.version} |" in open(os.path.join(out, CARD_FILE)).read()


def test_a_failing_format_writer_publishes_nothing(model_dir, tmp_path):
    from components.push.layout import served_versions
    from components.push.push import push_model

    def broken(folder, version):
        os.makedirs(folder)
        raise OSError("disk gone while writing hf/")
    base = str(tmp_path / "serving" / "gpt")
    with pytest.raises(OSError, match="hf/"):
        push_model(os.path.join(model_dir[1], "Format-Serving"), base, extras={"hf": broken})
    assert served_versions(base) == []
    assert [n for n in os.listdir(base) if n.startswith(".incoming")] == []


def test_sentencepiece_is_read_back_from_the_savedmodel_graph(tmp_path):
    from components.model.gpt import build_model
    from components.serving.export import write_serving_model
    from components.serving.hf.source import exported_tokenizer
    from components.tokenizer import training
    from components.tokenizer.sentencepiece_model import SentencePieceTokenizer
    from tests.support.texts import stdlib_texts
    sp = SentencePieceTokenizer(training.train_sentencepiece(stdlib_texts(["json"]), 400, "bpe"),
                                model_type="bpe")
    model = build_model(tiny_model_config("llama"), CONTEXT, vocab_size=sp.vocab_size)
    write_serving_model(model, CONTEXT, str(tmp_path / "Format-Serving"), tokenizer=sp,
                        signatures=("serving_default",), metadata={})
    info = json.load(open(tmp_path / "Format-Serving" / "assets.extra" / "bigtrain_model.json"))
    again = exported_tokenizer(str(tmp_path), info)
    assert again.model_proto == sp.model_proto and again.model_type == "bpe"


def home_whose_run_a_trained(root: str, home) -> int:
    """The synthetic store (benchmarks/support/lineage_store.py) with run-a's Model at `root`; its id."""
    from benchmarks.support import lineage_store
    from benchmarks.support.mlmd import connect
    store = connect(lineage_store.build(str(home)), read_only=False)
    [model] = [m for m in store.get_artifacts_by_type("Model") if "/run-a/" in m.uri]
    model.uri = root
    store.put_artifacts([model])
    return model.id


def test_every_card_carries_sources_counts_figures_version_and_run(model_dir, tmp_path):
    """The Pusher's card (push.formats [hf]) and the CLI's from a pushed version or a model
    folder: the run is found through lineage (the push record's model id, the folder's URI)."""
    from components.push.layout import HF_DIR
    from components.push.push import format_writers, push_model
    _, root = model_dir
    home = tmp_path / "home"
    model_id = home_whose_run_a_trained(root, home)
    result = push_model(os.path.join(root, "Format-Serving"), str(tmp_path / "served" / "gpt"),
                        record={"model_id": model_id, "model_uri": root},
                        extras=format_writers(["hf"], root, {"run_id": "run-a", "model_name": "gpt"}))
    pusher = open(os.path.join(result.path, HF_DIR, CARD_FILE)).read()
    version = f"| pushed version | {result.version} |"
    for text in ("| run id | run-a |", version, "/data/stdlib/*.py", "| `documents_packed` | 41 |",
                 "zlib -9 2.625", "| `steps` | 200 |", "| input fingerprint | fp-model |"):
        assert text in pusher, text
    cards = {}
    for name, source in (("version", result.path), ("folder", root)):
        out = str(tmp_path / name)
        assert cli.main(["export", "hf", source, "--home", str(home), "--out", out]) == 0
        cards[name] = open(os.path.join(out, CARD_FILE)).read()
        for text in ("| run id | run-a |", "/data/corpus/*.txt", "| `documents_packed` | 300 |",
                     "evaluator_float_loss", "zlib -9 2.625", "| input fingerprint | fp-run-a |"):
            assert text in cards[name], (name, text)
    assert version in cards["version"] and "| pushed version | 1 |" in cards["folder"]
    # No store at hand: what the model itself records, and the run id is "not recorded".
    out = str(tmp_path / "no-store")
    assert cli.main(["export", "hf", root, "--home", str(tmp_path / "empty"), "--out", out]) == 0
    alone = open(os.path.join(out, CARD_FILE)).read()
    assert "| run id | not recorded |" in alone and "/data/stdlib/*.py" in alone
