"""Where a local run puts its pipeline root and serving folder (issue 18): the orchestrator keys
when set (a path or a URI, kept as given), under the home when empty; a compiled pipeline gets
the cluster volume defaults instead. Catches: local runs ignoring orchestrator.pipeline_root /
serving_dir (the S3 run then writes everything under the home), a URI made "absolute"
(`/cwd/s3:/bucket`), and compile losing its defaults when the keys are empty."""

import os

from components import config as config_lib
from runners.local.home import LocalPaths


def test_empty_keys_mean_under_the_home(tmp_path):
    config = config_lib.build_config("tiny", overrides=[f"paths.home={tmp_path}"])
    paths = LocalPaths.for_config(config)
    assert paths.pipeline_root == os.path.join(str(tmp_path), "pipelines", config.paths.pipeline_name)
    assert paths.serving_dir == os.path.join(str(tmp_path), "serving")
    assert paths.remote() == []


def test_uris_and_paths_are_honoured(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = config_lib.build_config("tiny", overrides=[
        f"paths.home={tmp_path / 'home'}", "orchestrator.pipeline_root=s3://bucket/root",
        "orchestrator.serving_dir=relative/serving"])
    paths = LocalPaths.for_config(config)
    assert paths.pipeline_root == "s3://bucket/root" and paths.remote() == ["s3://bucket/root"]
    assert paths.serving_dir == str(tmp_path / "relative" / "serving")
    assert paths.runs_dir == str(tmp_path / "home" / "runs")  # run state stays in the home


def test_compile_fills_the_cluster_defaults():
    scheduled = config_lib.with_scheduled_paths(config_lib.build_config("tiny"))
    assert scheduled.orchestrator.pipeline_root == config_lib.SCHEDULED_PIPELINE_ROOT
    assert scheduled.orchestrator.serving_dir == config_lib.SCHEDULED_SERVING_DIR
    kept = config_lib.with_scheduled_paths(config_lib.build_config(
        "tiny", overrides=["orchestrator.pipeline_root=gs://b/root"]))
    assert kept.orchestrator.pipeline_root == "gs://b/root"
