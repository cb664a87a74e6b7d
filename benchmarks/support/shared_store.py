"""An MLMD store where one set of artifacts is shared by many runs, the shape a history of
cached runs (or a sweep over fixed data) leaves: run 0 produces Examples, statistics, anomalies,
a Model and a pushed version; every later run's executions are CACHED and, as TFX records a
cached execution, read the same inputs and re-emit the same outputs (OUTPUT events on the
artifacts run 0 made). Written with MLMD's batched calls (put_executions, put_events, one
association call), so 10,000 runs take seconds, not the hour of one put_execution each."""

from __future__ import annotations

import os

from ml_metadata.proto import metadata_store_pb2 as pb

from components.config.tree import SQLITE_FILE
from runners.local.home import PIPELINES_FOLDER, SERVING_FOLDER
from benchmarks.support.mlmd import connect

PIPELINE = "bigtrain"
Execution, Event = pb.Execution, pb.Event
# node -> (input key and the node whose output it reads, output key and artifact type)
NODES = {
    "TextExampleGen": (None, ("examples", "Examples")),
    "StatisticsGen": (("examples", "TextExampleGen"), ("statistics", "ExampleStatistics")),
    "ExampleValidator": (("statistics", "StatisticsGen"), ("anomalies", "ExampleAnomalies")),
    "Trainer": (("examples", "TextExampleGen"), ("model", "Model")),
    "Pusher": (("model", "Trainer"), ("pushed_model", "PushedModel")),
}


def event(kind, key: str, artifact_id: int, execution_id: int) -> Event:
    """An MLMD event of `kind` on the artifact under `key` (index 0), as TFX records one."""
    made = Event(type=kind, artifact_id=artifact_id, execution_id=execution_id)
    made.path.steps.add().key = key
    made.path.steps.add().index = 0
    return made


def build(home: str, runs: int) -> str:
    """<home>/metadata.sqlite with `runs` runs ('run-00000' produces, the rest are cached);
    the pushed version's folder is <home>/serving/gpt/1. Returns the store's path."""
    os.makedirs(home, exist_ok=True)
    path = os.path.join(home, SQLITE_FILE)
    store = connect(path, read_only=False)
    ctx_types = {n: store.put_context_type(pb.ContextType(name=n))
                 for n in ("pipeline", "pipeline_run", "node")}
    [pipeline] = store.put_contexts([pb.Context(type_id=ctx_types["pipeline"], name=PIPELINE)])
    node_ctx = dict(zip(NODES, store.put_contexts([
        pb.Context(type_id=ctx_types["node"], name=f"{PIPELINE}.{n}") for n in NODES])))
    run_ctx = store.put_contexts([pb.Context(type_id=ctx_types["pipeline_run"], name=f"run-{i:05d}")
                                  for i in range(runs)])
    outputs = _outputs(store, home)
    exec_types = {n: store.put_execution_type(pb.ExecutionType(name=f"{PIPELINE}.{n}"))
                  for n in NODES}
    executions = [Execution(type_id=exec_types[n], last_known_state=Execution.COMPLETE if i == 0
                            else Execution.CACHED) for i in range(runs) for n in NODES]
    ids = store.put_executions(executions)
    events, associations = [], []
    for position, execution_id in enumerate(ids):
        run, node = divmod(position, len(NODES))
        name = list(NODES)[node]
        read, (out_key, _) = NODES[name]
        if read:
            events.append(event(Event.INPUT, read[0], outputs[read[1]], execution_id))
        events.append(event(Event.OUTPUT, out_key, outputs[name], execution_id))
        associations += [pb.Association(context_id=c, execution_id=execution_id)
                         for c in (pipeline, run_ctx[run], node_ctx[name])]
    store.put_events(events)
    store.put_attributions_and_associations(
        [pb.Attribution(context_id=run_ctx[0], artifact_id=a) for a in outputs.values()],
        associations)
    return path


def _outputs(store, home: str) -> dict[str, int]:
    """node -> the id of the one artifact it outputs (run 0 made them all)."""
    made = {}
    for node, (_, (key, type_name)) in NODES.items():
        type_id = store.put_artifact_type(pb.ArtifactType(name=type_name))
        artifact = pb.Artifact(type_id=type_id, state=pb.Artifact.LIVE,
                               uri=os.path.join(home, PIPELINES_FOLDER, node, key))
        if type_name == "PushedModel":
            artifact.custom_properties["pushed"].int_value = 1
            artifact.custom_properties["pushed_version"].string_value = "1"
            artifact.custom_properties["pushed_destination"].string_value = version_dir(home)
        [made[node]] = store.put_artifacts([artifact])
    return made


def version_dir(home: str) -> str:
    return os.path.join(home, SERVING_FOLDER, "gpt", "1")
