"""A small MLMD store with the lineage package's record conventions, written without running a
pipeline: node / pipeline_run contexts as TFX's local runner names them, executions with their
states and parameters, artifacts with the properties the stages record (record.py's keys on the
runs and failed executions), artifact folders on disk, and TensorBoard event files for the curves.

Runs (oldest first): "run-a" trains (logging MFU too), evaluates and pushes version 1; "run-b"
re-trains from run-a's model (fine-tuned from), pushes version 2, has a Tuner and a cached
StatisticsGen; "run-c" fails in the Trainer and has an abandoned ExampleValidator (every stage
state: complete, cached, failed, abandoned).
Used by tests/ui (route and browser tests) and benchmarks/lineage_speed.py (cloned N times)."""

from __future__ import annotations

import json
import os

from ml_metadata.proto import metadata_store_pb2 as pb

from components.config.tree import SQLITE_FILE
from components.push.layout import PUSH_RECORD
from pipeline.lineage import record
from runners.local.home import PIPELINES_FOLDER, RUN_LOG, RUNS_FOLDER, SERVING_FOLDER
from benchmarks.support.mlmd import connect

PIPELINE = "bigtrain"
Execution, Event = pb.Execution, pb.Event


def _put_types(store) -> dict[str, int]:
    ids = {}
    for name in ("pipeline", "pipeline_run", "node"):
        ids[name] = store.put_context_type(pb.ContextType(name=name))
    return ids


def _context(store, types, kind: str, name: str, props: dict | None = None) -> pb.Context:
    ctx = store.get_context_by_type_and_name(kind, name)
    if ctx is None:
        ctx = pb.Context(type_id=types[kind], name=name)
        for key, value in (props or {}).items():
            _set(ctx.custom_properties[key], value)
        [ctx.id] = store.put_contexts([ctx])
    return ctx


def _set(value: pb.Value, item) -> None:
    if isinstance(item, bool) or isinstance(item, int):
        value.int_value = int(item)
    elif isinstance(item, float):
        value.double_value = item
    else:
        value.string_value = str(item)


class Builder:
    def __init__(self, store, root: str):
        self.store, self.root, self.types = store, root, _put_types(store)
        self.pipeline = _context(store, self.types, "pipeline", PIPELINE)

    def artifact(self, type_name: str, name: str, props: dict, run: str) -> pb.Artifact:
        type_id = self.store.put_artifact_type(pb.ArtifactType(name=type_name))
        uri = os.path.join(self.root, PIPELINES_FOLDER, run, name)
        os.makedirs(uri, exist_ok=True)
        artifact = pb.Artifact(type_id=type_id, uri=uri, state=pb.Artifact.LIVE)
        for key, value in props.items():
            _set(artifact.custom_properties[key], value)
        return artifact

    def execution(self, run_ctx, node: str, state, inputs: dict, outputs: dict,
                  params: dict | None = None, extra: dict | None = None) -> dict[str, int]:
        """inputs: {key: [existing artifact ids]}; outputs: {key: new Artifact}. -> output ids."""
        type_id = self.store.put_execution_type(pb.ExecutionType(name=f"bigtrain.{node}"))
        execution = pb.Execution(type_id=type_id, last_known_state=state)
        for key, value in {**(params or {}), **(extra or {})}.items():
            _set(execution.custom_properties[key], value)
        node_ctx = _context(self.store, self.types, "node", f"{PIPELINE}.{node}")
        pairs = []
        for key, ids in inputs.items():
            for artifact in self.store.get_artifacts_by_id(ids):
                pairs.append((artifact, _event(Event.INPUT, key)))
        for key, artifact in outputs.items():
            pairs.append((artifact, _event(Event.OUTPUT, key)))
        _, artifact_ids, _ = self.store.put_execution(
            execution, pairs, [self.pipeline, run_ctx, node_ctx])
        return {key: artifact_ids[len(pairs) - len(outputs) + i] for i, key in enumerate(outputs)}


def _event(kind, key: str) -> Event:
    event = Event(type=kind)
    event.path.steps.add().key = key
    event.path.steps.add().index = 0
    return event


def write_curves(model_run_dir: str, steps: int = 20, mfu: bool = False) -> None:
    """TensorBoard scalars as training writes them (loss, learning_rate, tokens_per_second; mfu
    when asked: training logs it where the accelerator's peak is known), with tensorboard's own
    event writer (no TensorFlow needed)."""
    from pipeline.lineage.web.curves import tensorboard_without_tensorflow
    tensorboard_without_tensorflow()
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    writer = EventFileWriter(os.path.join(model_run_dir, "train"))
    for step in range(1, steps + 1):
        values = {"loss": 5.0 / step ** 0.5, "learning_rate": 1e-3 * min(1.0, step / 5),
                  "tokens_per_second": 1000.0 + 10 * step}
        if mfu:
            values["mfu"] = 0.30 + 0.005 * step
            if step % 5 == 0:            # train.eval_every=5, logged where mfu is (one run)
                values["validation_loss"] = 5.2 / step ** 0.5
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=v)
                                             for t, v in values.items()])
        writer.add_event(event_pb2.Event(step=step, wall_time=1.7e9 + step, summary=summary))
    writer.close()


def build(home: str, hostile: str = "") -> str:
    """A store at <home>/metadata.sqlite with runs run-a, run-b, run-c; returns its path.
    hostile: a string (e.g. '<script>') put into a run name and an artifact property."""
    os.makedirs(home, exist_ok=True)
    path = os.path.join(home, SQLITE_FILE)
    store = connect(path, read_only=False)
    b = Builder(store, home)
    model_a = _one_run(b, "run-a", version=1, base_model=None)
    _one_run(b, "run-b" + hostile, version=2, base_model=model_a, tuner=True, hostile=hostile)
    _one_run(b, "run-c", version=None, base_model=None, fail=True)
    return path


def _one_run(b: Builder, run_id: str, version, base_model, tuner=False, fail=False, hostile=""):
    home = b.root
    run_ctx = _context(b.store, b.types, "pipeline_run", run_id, {
        record.RUN_DIR: os.path.join(home, RUNS_FOLDER, run_id),
        record.RUN_LOG: os.path.join(home, RUNS_FOLDER, run_id, RUN_LOG),
        record.RUN_WHY: "first run" if run_id == "run-a" else "config changed: train.train_steps",
        # run-a was tracked (config tracking.backends): its tracker run ids.
        **({record.RUN_TRACKERS: '{"mlflow": "0a1b2c", "wandb": "run-a"}'} if run_id == "run-a" else {})})
    os.makedirs(os.path.join(home, RUNS_FOLDER, run_id), exist_ok=True)
    with open(os.path.join(home, RUNS_FOLDER, run_id, RUN_LOG), "w", encoding="utf-8") as fh:
        fh.write(f"log of {run_id}\n")
    done = Execution.COMPLETE
    ex = b.execution(run_ctx, "TextExampleGen", done, {}, {"examples": b.artifact("Examples", "examples", {
        "input": "/data/corpus/*.txt" + hostile, "input_root": "/data/corpus",
        "input_fingerprint": "fp-" + run_id, "files_listed": 12, "files_read": 11,
        "documents_packed": 300, "sequences_train": 90, "sequences_eval": 10,
        "tokens_real": 40000, "bytes_quarantined": 17, "real_token_fraction": 0.95}, run_id)}, {"data_config": '{"seq_len": 128}'})
    examples = ex["examples"]
    tok = b.execution(run_ctx, "TokenizerGen", done, {"examples": [examples]}, {"tokenizer": b.artifact(
        "Tokenizer", "tokenizer", {"kind": "bytes", "vocab_size": 259, "bytes_per_token": 1.0}, run_id)})
    stats = b.execution(run_ctx, "StatisticsGen", Execution.CACHED if tuner else done,
                        {"examples": [examples]},
                        {"statistics": b.artifact("ExampleStatistics", "statistics", {}, run_id)})
    # run-c: a validator whose process died (record.mark_abandoned's marks: CANCELED + the note)
    b.execution(run_ctx, "ExampleValidator", Execution.CANCELED if fail else done,
                {"statistics": [stats["statistics"]]},
                {"anomalies": b.artifact("ExampleAnomalies", "anomalies", {}, run_id)},
                extra={record.ABANDONED_BY: "pid 4242 died; found by run-d"} if fail else None)
    train_inputs = {"examples": [examples], "tokenizer": [tok["tokenizer"]]}
    if base_model:
        train_inputs["base_model"] = [base_model]
    if tuner:
        trials = [{"trial_id": "00", "status": "COMPLETED", "values": {"train.learning_rate": 1e-3},
                   "steps": 10, "seconds": 2.5, "eval_loss": 3.1},
                  {"trial_id": "01", "status": "COMPLETED", "values": {"train.learning_rate": 3e-3},
                   "steps": 10, "seconds": 2.4, "eval_loss": 2.9}]
        tuned = b.execution(run_ctx, "Tuner", done, {"examples": [examples]}, {
            "tuner_results": b.artifact("TunerResults", "tuner_results", {
                "trials": 2, "trials_completed": 2, "algorithm": "random", "best_trial": "01",
                "best_eval_loss": 2.9, "trials_json": json.dumps(trials)}, run_id),
            "best_hyperparameters": b.artifact("HyperParameters", "best_hparams", {}, run_id)})
        train_inputs["hyperparameters"] = [tuned["best_hyperparameters"]]
    if fail:
        b.execution(run_ctx, "Trainer", Execution.FAILED, train_inputs, {}, {"train_steps": 20}, {
            record.ERROR: "loss diverged <b>", record.ERROR_TYPE: "TrainingDiverged"})
        return None
    model_props = {"steps": 20, "eval_loss": 2.5 if version == 1 else 2.3, "eval_bits_per_byte": 3.6,
                   "tokens_per_second": 1200.0, "code_digest": "code-1",
                   "final_loss": 2.4, "unigram_baseline_loss": 5.5, "note": "trained" + hostile}
    if base_model:
        model_props["fine_tuned_from_model_id"] = base_model
    trained = b.execution(run_ctx, "Trainer", done, train_inputs, {
        "model": b.artifact("Model", "model", model_props, run_id),
        "model_run": b.artifact("ModelRun", "model_run", {}, run_id)},
        {"train_config": json.dumps({"train_steps": 20, "learning_rate": 1e-3 * version})})
    write_curves(b.store.get_artifacts_by_id([trained["model_run"]])[0].uri, mfu=version == 1)
    evaluation = b.execution(run_ctx, "LanguageModelEvaluator", done, {"model": [trained["model"]]}, {
        "evaluation": b.artifact("ModelEvaluation", "evaluation", {
            "loss": model_props["eval_loss"], "bits_per_byte": 3.6, "variants": "float,int8",
            "serve_variant": "float", "float_loss": 2.3, "float_loss_delta": 0.0,
            "float_size_bytes": 4_000_000, "float_latency_ms": 12.5, "float_fit_to_serve": 1,
            "int8_loss": 2.31, "int8_loss_delta": 0.01, "int8_size_bytes": 1_000_000,
            "int8_latency_ms": 9.0, "int8_fit_to_serve": 1}, run_id),
        "blessing": b.artifact("ModelBlessing", "blessing", {"blessed": 1, "reason": "loss ok"}, run_id)})
    dest = os.path.join(home, SERVING_FOLDER, "gpt", str(version))
    os.makedirs(os.path.dirname(os.path.join(dest, PUSH_RECORD)), exist_ok=True)
    with open(os.path.join(dest, PUSH_RECORD), "w", encoding="utf-8") as fh:
        json.dump({"model_id": trained["model"], "version": version}, fh)  # as push.py writes it
    b.execution(run_ctx, "Pusher", done, {"model": [trained["model"]],
                                          "model_blessing": [evaluation["blessing"]]}, {
        "pushed_model": b.artifact("PushedModel", "pushed", {
            "pushed": 1, "pushed_version": str(version), "pushed_destination": dest}, run_id)})
    return trained["model"]

