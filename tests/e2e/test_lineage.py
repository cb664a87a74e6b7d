"""`bigtrain lineage` on the chain's real MLMD store (tests/e2e/conftest.py chain: six runs in one
home, the failed one last): complete, cached and failed runs."""

import os
import xml.etree.ElementTree as ElementTree

import pytest

from runners.cli import app as cli
from tests.support.pipeline_run import lineage_json, lineage_text

pytestmark = pytest.mark.slow


def test_failed_run_is_recorded(failed_run):
    assert failed_run.exit_code == 1
    assert failed_run.states()["Trainer"] == "failed"
    assert "bigtrain lineage why" in failed_run.stderr


def test_runs_newest_first_with_states(failed_run, data_run, capsys):
    runs = lineage_json(capsys, failed_run.home, "runs")
    assert [r["run_id"] for r in runs][:1] == [failed_run.run_id]
    assert len(runs) == 6 and runs[-1]["run_id"] == data_run.run_id   # the chain's six
    assert runs[0]["state"] == "failed" and runs[0]["stages"]["Trainer"] == "failed"
    assert runs[-1]["state"] == "complete" and runs[-1]["pushed_version"] == str(max(data_run.served_after))
    assert runs[-2]["stages"]["Trainer"] == "cached"  # the identical re-run
    text = lineage_text(capsys, failed_run.home, "runs")
    assert text.splitlines()[0].split()[:5] == ["run", "start", "duration", "state", "pushed"]
    assert "Trainer:cached" in text and "Trainer:FAILED" in text


def test_trace_from_serving_dir_reaches_raw_input(failed_run, data_run, capsys):
    version_dir = os.path.join(data_run.home, "serving", "gpt", str(max(data_run.served_after)))
    result = lineage_json(capsys, failed_run.home, "trace", version_dir)
    types = [s["type"] for s in result["steps"]]
    for kind in ("PushedModel", "Model", "ModelBlessing", "Examples", "Schema"):
        assert kind in types, types
    blessing = next(s for s in result["steps"] if s["type"] == "ModelBlessing")
    assert blessing["evaluation"]["properties"]["loss"] > 0
    examples = next(s for s in result["steps"] if s["type"] == "Examples")
    assert examples["raw_input"]["input"] == data_run.corpus
    assert len(examples["raw_input"]["fingerprint"]) == 64
    assert examples["anomalies"][0]["properties"]["anomalies_found"] == "none"
    model = next(s for s in result["steps"] if s["type"] == "Model")
    assert model["made_by"]["node"] == "Trainer" and "code_digest" in model["properties"]
    text = lineage_text(capsys, failed_run.home, "trace", version_dir)
    assert "raw input: " + data_run.corpus in text and "<- Trainer" in text


def test_trace_down_lists_models_trained_on_examples(failed_run, capsys):
    result = lineage_json(capsys, failed_run.home, "trace", "--down", _examples_id(failed_run))
    assert len(result["models"]) == 2  # the first run's model and the changed learning rate's
    text = lineage_text(capsys, failed_run.home, "trace", "--down", _examples_id(failed_run))
    assert "used by Trainer" in text and "models trained on it: #" in text


def _examples_id(run):
    return str(run.report().stage("TextExampleGen").outputs["Examples"]["id"])


def test_diff_names_the_changed_hyper_parameter(changed_lr_run, data_run, failed_run, capsys):
    result = lineage_json(capsys, failed_run.home, "diff", data_run.run_id, changed_lr_run.run_id)
    changed = {(c["node"], c["key"]): (c["a"], c["b"]) for c in result["config"]}
    assert changed[("Trainer", "custom_config.train.learning_rate")] == (0.003, 0.002)
    assert not result["data_changed"] and not result["code_changed"]
    stages = {s["node"]: (s["a"], s["b"]) for s in result["stages"]}
    assert stages["TextExampleGen"] == ("complete", "cached") and stages["Trainer"] == ("complete", "complete")
    text = lineage_text(capsys, failed_run.home, "diff", data_run.run_id, changed_lr_run.run_id)
    assert "custom_config.train.learning_rate" in text and "data changed: no" in text


def test_graph_writes_dot_mermaid_svg_png(failed_run, data_run, capsys, tmp_path):
    import pydot
    from PIL import Image
    result = lineage_json(capsys, failed_run.home, "graph", data_run.run_id, "--out", str(tmp_path))
    files = result["files"]
    (dot,) = pydot.graph_from_dot_file(files["dot"])
    assert len(dot.get_nodes()) >= 9 + 10 and len(dot.get_edges()) >= 15
    svg = ElementTree.parse(files["svg"]).getroot()
    assert svg.tag.endswith("svg") and len(list(svg.iter("{http://www.w3.org/2000/svg}rect"))) == len(result["nodes"])
    with Image.open(files["png"]) as image:
        assert image.size[0] > 800 and image.size[1] > 50
        assert len(set(image.getdata())) > 3  # not a blank picture
    assert open(files["mmd"]).read().startswith("flowchart LR")
    assert "digraph" in lineage_text(capsys, failed_run.home, "graph", data_run.run_id)


def test_why_names_the_failing_stage_and_root_cause(failed_run, capsys):
    result = lineage_json(capsys, failed_run.home, "why", failed_run.run_id)
    (failure,) = result["failed"]
    assert failure["node"] == "Trainer"
    assert failure["error_type"] == "MemoryError"
    assert "eval.batch_size=100000" in failure["error"]
    assert os.path.exists(failure["log"]) and os.path.getsize(failure["log"]) > 0
    assert {i["type"] for i in failure["inputs"]} >= {"Examples", "Schema"}
    assert "stage:  Trainer" in lineage_text(capsys, failed_run.home, "why")


def test_unknown_run_is_a_clear_error(failed_run, capsys):
    assert cli.main(["lineage", "why", "no-such-run", "--home", failed_run.home]) == cli.EXIT_FAILED
    assert "run 'no-such-run' not found" in capsys.readouterr().err


def test_trace_shows_variant_figures(data_run, capsys):
    from runners.cli import app as cli
    version = max(data_run.served_after)
    capsys.readouterr()
    assert cli.main(["lineage", "trace", os.path.join(data_run.home, "serving", "gpt", str(version)),
                     "--home", data_run.home]) == 0
    out = capsys.readouterr().out
    for name in ("int8_loss_delta", "tflite_loss_delta", "tflite_size_bytes", "int8_latency_ms",
                 "tflite_loss_delta_se", "int8_batches",
                 "serve_variant"):
        assert name in out, name
