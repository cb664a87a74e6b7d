"""The Airflow DAG from `bigtrain compile airflow`, run end to end with a real Airflow 2.10
(temporary AIRFLOW_HOME with its sqlite database) with every task in its own process (`airflow
tasks test DAG TASK RUN_ID` per task, in dependency order, on one triggered DAG run). It pushes a
model, and MLMD holds the same lineage shape as a local run.

A second run of the same DAG in one process (`dag.test()`) was merged into this one (2026-11-23,
test-tier times): it proved nothing this run does not (the DAG parses, every task succeeds, one
model is pushed, MLMD is complete), and a stage that only works after another ran in the same
process is what this run catches. Its checks of the DAG's schedule and retries are made here.
The same run checks the OpenLineage events every task process sends (issue 42)."""

import json
import os
import subprocess
import sys

import pytest

from pipeline.lineage import queries
from pipeline.lineage.store import Lineage
from benchmarks.support.mlmd import connect
from components.push.layout import served_versions
from runners.cli import app as cli
from tests.conftest import PLAIN_STEP
from tests.support.corpora import _tiny_corpus
from tests.support.fork_server import ForkServer
from tests.support.openlineage_spec import Receiver, check_run_event, dataset_uris, stage_events

pytestmark = pytest.mark.slow

# Parses the DAG file, checks its schedule and retries, stores it in Airflow's database (what
# `airflow dags reserialize` does) and prints the task order: one process for what took two.
PARSE_AND_SERIALIZE = """
import json, sys
from airflow.models.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1], include_examples=False)
assert not bag.import_errors, bag.import_errors
dag = bag.get_dag("bigtrain")
assert dag.schedule_interval == "@weekly", dag.schedule_interval
assert dag.default_args["retries"] == 2
bag.sync_to_db()
print("TASK_ORDER", json.dumps([t.task_id for t in dag.topological_sort()]))
"""

# What the DAG file imports (runners/orchestrators/airflow.py build_dag), imported once by the fork server.
DAG_IMPORTS = ["airflow.__main__", "tensorflow", "tfx.orchestration.airflow.airflow_dag_runner",
               "pipeline.pipeline", "runners.orchestrators.airflow", "runners.openlineage_emit"]
# A guard against a hung process, not a speed limit: at a load average of 25 on the 2-core VM
# (2026-11-27) the parsing process alone passed the old 300 s limit, importing TensorFlow.
HANG_GUARD_S = 3600


def compile_dag(tmp_path, corpus):
    """The DAG file in a fresh AIRFLOW_HOME with a migrated sqlite DB; returns (dag file, env)."""
    home = tmp_path / "airflow"
    dag_file = home / "dags" / "bigtrain_dag.py"
    # The smallest run that proves the orchestration: a corpus of 8 small files (~48 KB, not the
    # session's two stdlib packages: the data stages and the Trainer's evaluation scale with it),
    # a one-block model (what is orchestrated is the same Trainer and export), 10 steps, 2
    # evaluation batches in the Trainer and the Evaluator, a loose threshold so the model is
    # blessed and pushed, no int8/TFLite variants (exported and measured by tests/e2e and
    # tests/export; each variant costs the Trainer and the Evaluator seconds in every process).
    overrides = [f"data.input={corpus}", "data.eval_fraction=0.3", "data.seq_len=64",
                 "model.n_layer=1", "train.train_steps=10", "train.warmup_steps=2",
                 "train.eval_batches=2", "eval.max_loss=10", "eval.max_batches=2",
                 "eval.batch_size=8", "export.quantize=[]",
                 "eval.sets=[]",   # the held-out set and code tasks: the chain's to test
                 "runtime.strategy=one_device",   # tests/e2e/conftest.py ONE_DEVICE
                 PLAIN_STEP,                      # the plain step: tests/conftest.py
                 f"orchestrator.pipeline_root={tmp_path / 'root'}",
                 f"orchestrator.serving_dir={tmp_path / 'serving'}",
                 f"orchestrator.metadata_path={tmp_path / 'metadata.sqlite'}",
                 "orchestrator.schedule=@weekly", "orchestrator.retries=2"]
    assert cli.main(["compile", "airflow", "--out", str(dag_file),
                     *[a for o in overrides for a in ("--set", o)]]) == 0
    # Parsing the DAG file imports TensorFlow and TFX: past Airflow's 30 s default when the
    # machine is busy (other test workers), and the task then fails as "Failed to import".
    env = dict(os.environ, AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False",
               AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT="600", TF_CPP_MIN_LOG_LEVEL="2")
    bin_dir = os.path.dirname(sys.executable)
    subprocess.run([os.path.join(bin_dir, "airflow"), "db", "migrate"], env=env, check=True,
                   capture_output=True, timeout=HANG_GUARD_S)
    return dag_file, env


def small_corpus(tmp_path) -> str:
    """The corpus of the S3 run (tests/e2e/test_object_store_run.py): 8 files, 2 folders."""
    root = tmp_path / "corpus"
    for folder in ("a", "b"):
        (root / folder).mkdir(parents=True)
    _tiny_corpus(str(root))
    return str(root)


def test_airflow_runs_each_task_in_its_own_process(tmp_path):
    """One DAG run (`airflow dags trigger`), then one `airflow tasks test` process per task in
    the DAG's dependency order: the tasks share nothing but MLMD and the pipeline root. Catches:
    a task that needs state left in memory by an upstream task of the same process (what
    `dag.test()` cannot see), a DAG whose dependencies miss an edge (a task would find no input).
    Every task process sends its OpenLineage events to an HTTP endpoint here (check_openlineage).
    The processes are forks of one server that imported what the DAG file imports and ran
    nothing (tests/support/fork_server.py), as Airflow's executors fork them: 43 CPU-s where
    fresh interpreters took 174 (each imported TensorFlow and TFX again)."""
    corpus = small_corpus(tmp_path)
    dag_file, env = compile_dag(tmp_path, corpus)
    receiver = Receiver()
    env = {k: v for k, v in env.items() if k not in ("OPENLINEAGE_DISABLED", "OPENLINEAGE_CONFIG")}
    env["OPENLINEAGE_URL"] = receiver.url
    with ForkServer(env, DAG_IMPORTS, hang_guard_s=HANG_GUARD_S) as server:
        code, out = server.python(PARSE_AND_SERIALIZE, [str(dag_file)])
        assert code == 0, out[-4000:]
        (line,) = [l for l in out.splitlines() if l.startswith("TASK_ORDER ")]
        tasks = json.loads(line.split(" ", 1)[1])
        assert len(tasks) == 9 and tasks[-1] == "Pusher", tasks
        code, out = server.airflow(["dags", "trigger", "bigtrain", "-r", "one-run"])
        assert code == 0, out[-4000:]
        for task in tasks:
            code, out = server.airflow(["tasks", "test", "bigtrain", task, "one-run"])
            assert code == 0 and "Marking task as SUCCESS" in out, (task, out[-6000:])
    receiver.close()
    lin, trace = check_pushed_run(tmp_path, corpus)
    check_openlineage([body for _, body in receiver.events], tasks, lin, trace)


def check_openlineage(events, tasks, lin, trace):
    """The Airflow path of issue 42, item 3: each task sent START then COMPLETE (its own process,
    the DAG's callbacks), every event valid against the spec as the client carries it, the stages'
    parent the Airflow run; each traced artifact is an output of its producer's COMPLETE event and
    the producer's inputs are that event's inputs, URI for URI (as from a local run,
    tests/e2e/test_openlineage_run.py)."""
    for event in events:
        check_run_event(event)
    by_stage = stage_events(events, "one-run")
    assert {stage: [e["eventType"] for e in got] for stage, got in by_stage.items()} == {
        task: ["START", "COMPLETE"] for task in tasks}, by_stage
    checked = 0
    for step in trace["steps"]:
        made_by = step.get("made_by")
        if not made_by:
            continue
        complete = by_stage[made_by["node"]][-1]
        assert step["uri"] in dataset_uris(complete, "outputs"), (step["uri"], complete["outputs"])
        inputs = {a.uri for a in lin.store.get_artifacts_by_id(
            [i for ids in made_by["inputs"].values() for i in ids])}
        assert inputs == dataset_uris(complete, "inputs"), (made_by["node"], complete["inputs"])
        checked += 1
    assert checked >= 5, trace


def check_pushed_run(tmp_path, corpus):
    """One version pushed; MLMD: one complete run with every stage and the local run's lineage.
    Returns the store's Lineage and the pushed version's trace."""
    versions = served_versions(str(tmp_path / "serving" / "gpt"))
    assert len(versions) == 1
    lin = Lineage(connect(str(tmp_path / "metadata.sqlite")))
    (run,) = queries.list_runs(lin)
    assert run["state"] == "complete" and run["pushed_version"] == str(versions[0])
    assert set(run["stages"]) == {"CuratedSchemaGen", "TextExampleGen", "StatisticsGen",
                                  "ExampleValidator", "AnomaliesGate", "Trainer",
                                  "LanguageModelEvaluator", "Pusher"}
    # Same lineage shape as a local run: serving dir -> pushed model <- blessing <- model <-
    # examples <- raw input.
    trace = queries.trace(lin, str(tmp_path / "serving" / "gpt" / str(versions[0])))
    producers = {s["type"]: s["made_by"]["node"] for s in trace["steps"] if s.get("made_by")}
    assert producers == {"PushedModel": "Pusher", "Model": "Trainer",
                         "ModelBlessing": "LanguageModelEvaluator", "Examples": "TextExampleGen",
                         "Schema": "CuratedSchemaGen"}
    examples = next(s for s in trace["steps"] if s["type"] == "Examples")
    assert examples["raw_input"]["input"] == corpus
    return lin, trace
