"""The Pusher gets its typed section like every other stage: custom_config {"push": section_json}
built by the pipeline, read back with stages.read_back (PUSHER_READS) by its executor, which hands push_model the
deployment settings and formats of that section. Before issue 39 the pipeline hand-built an
untyped {"deploy": ..., "formats": ...} dict that the executor read with .get()."""

from __future__ import annotations

import json

from components import config as config_lib
from components.push import executor as executor_lib


def _pusher_properties(config, tmp_path) -> dict:
    from pipeline.pipeline import create_pipeline
    pipeline = create_pipeline(config, pipeline_root=str(tmp_path / "root"),
                               serving_dir=str(tmp_path / "serving"), input_fingerprint="f" * 64)
    node = next(c for c in pipeline.components if c.id == "Pusher")
    return dict(node.exec_properties)


def test_the_pusher_gets_the_push_section_and_its_executor_uses_it(tmp_path, monkeypatch):
    from tfx.types import standard_artifacts
    config = config_lib.build_config("tiny", None, [
        "push.keep_versions=2", "push.version_policy=latest", "push.formats=[hf]"])
    props = _pusher_properties(config, tmp_path)
    assert json.loads(props["custom_config"]) == {"push": config_lib.section_json(config.push)}

    seen = {}

    def fake_push(source, base_dir, record=None, deploy=None, extras=None):
        seen.update(deploy=deploy, extras=sorted(extras))
        return type("Result", (), {"pushed": True, "path": base_dir, "version": 1, "reason": "ok"})()

    monkeypatch.setattr(executor_lib, "push_model", fake_push)
    model, blessing = standard_artifacts.Model(), standard_artifacts.ModelBlessing()
    model.uri = str(tmp_path / "model")
    blessing.set_int_custom_property("blessed", 1)
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(tmp_path / "pushed")
    executor_lib.AtomicPusherExecutor().Do(
        {"model": [model], "model_blessing": [blessing]}, {"pushed_model": [pushed]}, props)
    assert seen == {"deploy": {"keep_versions": 2, "policy": "latest"}, "extras": ["hf"]}


def test_only_the_push_section_is_the_pushers_cache_key(tmp_path):
    base = config_lib.build_config("tiny")
    trained = config_lib.build_config("tiny", None, ["train.learning_rate=0.002"])
    pushed = config_lib.build_config("tiny", None, ["push.keep_versions=2"])
    key = _pusher_properties(base, tmp_path)["custom_config"]
    assert _pusher_properties(trained, tmp_path)["custom_config"] == key
    assert _pusher_properties(pushed, tmp_path)["custom_config"] != key
