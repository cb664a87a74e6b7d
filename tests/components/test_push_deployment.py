"""Deployment files next to the pushed versions: models.config (TF Serving's ModelServerConfig:
name, base path, version policy, stable/canary labels moved by each push), batching_parameters,
and push.keep_versions retention. Fake SavedModels (a saved_model.pb of distinct bytes): the
Pusher copies files and never parses them."""

import os

import pytest
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from components.push import layout
from components.push.layout import served_versions
from components.push.push import push_model
from components.serving.batching import BATCHING


def fake_model(tmp_path, index: int) -> str:
    path = tmp_path / f"export-{index}"
    (path / "variables").mkdir(parents=True, exist_ok=True)
    (path / "saved_model.pb").write_bytes(f"graph {index}".encode())
    return str(path)


def parsed_config(base: str):
    with open(os.path.join(base, layout.MODELS_CONFIG)) as fh:
        config = text_format.Parse(fh.read(), model_server_config_pb2.ModelServerConfig())
    (model,) = config.model_config_list.config
    return model


def test_labels_move_with_each_push_and_retention_keeps_labelled_versions(tmp_path):
    """keep_versions=1 keeps the newest version and the labelled ones: stable (the previous canary)
    survives. Caught: retention that ignores labels (stable deleted while models.config names it),
    labels not moved, or a policy that does not list the labelled versions."""
    base = str(tmp_path / "serving" / "gpt")
    pushed = []
    for index in range(4):
        result = push_model(fake_model(tmp_path, index), base, deploy={"keep_versions": 1})
        pushed.append(result.version)
        model = parsed_config(base)
        stable = pushed[-2] if len(pushed) > 1 else pushed[-1]
        assert dict(model.version_labels) == {"stable": stable, "canary": pushed[-1]}
        assert sorted(model.model_version_policy.specific.versions) == sorted({stable, pushed[-1]})
        assert served_versions(base) == sorted({stable, pushed[-1]})
    assert model.name == "gpt" and model.base_path == os.path.abspath(base)
    assert model.model_platform == "tensorflow"
    assert not [n for n in os.listdir(base) if n.startswith(".retired")]   # no half-deleted leftovers


def test_default_keeps_the_last_five(tmp_path):
    base = str(tmp_path / "gpt")
    versions = [push_model(fake_model(tmp_path, i), base).version for i in range(7)]
    assert served_versions(base) == versions[-5:]
    again = push_model(fake_model(tmp_path, 6), base)          # already served: nothing moves
    assert not again.pushed and served_versions(base) == versions[-5:]
    assert dict(parsed_config(base).version_labels) == {"stable": versions[-2], "canary": versions[-1]}


def test_latest_policy_has_no_labels(tmp_path):
    base = str(tmp_path / "gpt")
    versions = [push_model(fake_model(tmp_path, i), base, deploy={"keep_versions": 2, "policy": "latest"}).version
                for i in range(3)]
    model = parsed_config(base)
    assert model.model_version_policy.latest.num_versions == 1 and not model.version_labels
    assert served_versions(base) == versions[-2:]


def test_batching_parameters_file(tmp_path):
    base = str(tmp_path / "gpt")
    push_model(fake_model(tmp_path, 0), base)
    text = open(os.path.join(base, layout.BATCHING_FILE)).read().splitlines()
    assert f"max_batch_size {{ value: {BATCHING['max_batch_size']} }}" in text
    assert [int(line.split(":")[1]) for line in text if line.startswith("allowed_batch_sizes")] == \
        list(BATCHING["allowed_batch_sizes"])
    assert BATCHING["allowed_batch_sizes"][-1] == BATCHING["max_batch_size"]  # TF Serving requires it
    assert "pad_variable_length_inputs: true" in text


@pytest.fixture
def s3_prefix(monkeypatch):
    from components.storage import fs
    from tests.support.objectstore import use_objectstore
    prefix = use_objectstore(monkeypatch)
    yield prefix
    fs.rmtree(prefix)


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_retention_and_labels_on_s3(tmp_path, s3_prefix):
    """The same files and retention on an object store (moto S3 from `make objectstore`): an old
    version loses its graph first, then the rest."""
    from components.storage import fs
    base = f"{s3_prefix}/gpt"
    versions = [push_model(fake_model(tmp_path, i), base, deploy={"keep_versions": 1}).version for i in range(3)]
    assert served_versions(base) == versions[-2:]
    assert not fs.exists(fs.join(base, str(versions[0]), "variables"))
    labels = layout.read_labels(base)
    assert labels == {"stable": versions[1], "canary": versions[2]}
    assert fs.exists(fs.join(base, layout.BATCHING_FILE))


def test_bad_settings_are_errors(tmp_path):
    from components import config as config_lib
    base = str(tmp_path / "gpt")
    with pytest.raises(ValueError, match="keep_versions must be >= 1"):
        push_model(fake_model(tmp_path, 0), base, deploy={"keep_versions": 0})
    with pytest.raises(ValueError, match="version policy must be one of"):
        push_model(fake_model(tmp_path, 1), base, deploy={"policy": "newest"})
    with pytest.raises(config_lib.ConfigError, match="push.keep_versions"):
        config_lib.build_config("tiny", overrides=["push.keep_versions=0"])
    with pytest.raises(config_lib.ConfigError, match="push.version_policy"):
        config_lib.build_config("tiny", overrides=["push.version_policy=all"])
