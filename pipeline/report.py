"""The run report: what each stage of one pipeline run did, read back from ML Metadata."""

from __future__ import annotations

from dataclasses import dataclass, field

from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2

STATES = {v: k.lower() for k, v in metadata_store_pb2.Execution.State.items()}


@dataclass
class StageReport:
    node: str
    state: str
    duration_s: float
    outputs: dict[str, dict] = field(default_factory=dict)


@dataclass
class RunReport:
    run_id: str
    stages: list[StageReport]


def open_store(metadata_path: str) -> metadata_store.MetadataStore:
    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = metadata_path
    cfg.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    return metadata_store.MetadataStore(cfg)


def custom_properties(obj) -> dict:
    out = {}
    for key, value in obj.custom_properties.items():
        kind = value.WhichOneof("value")
        out[key] = getattr(value, kind) if kind in ("int_value", "double_value", "string_value") \
            else str(getattr(value, kind))
    return out


def run_report(store: metadata_store.MetadataStore, pipeline_name: str,
               run_id: str | None = None) -> RunReport:
    """The newest run of the pipeline (or run_id): stages in execution order with their outputs."""
    runs = [c for c in store.get_contexts_by_type("pipeline_run")]
    node_contexts = {c.id: c.name for c in store.get_contexts_by_type("node")}
    if not runs:
        raise LookupError("no pipeline run recorded in this metadata store")
    run = next((c for c in runs if c.name == run_id), None) if run_id else \
        max(runs, key=lambda c: (c.create_time_since_epoch, c.id))
    if run is None:
        raise LookupError(f"no pipeline run {run_id!r}")
    executions = sorted(store.get_executions_by_context(run.id), key=lambda e: e.id)
    node_of = {}
    for ctx_id, name in node_contexts.items():
        for execution in store.get_executions_by_context(ctx_id):
            node_of[execution.id] = name.split(".", 1)[-1]
    stages = []
    for execution in executions:
        stage = StageReport(
            node=node_of.get(execution.id, execution.name or str(execution.id)),
            state=STATES.get(execution.last_known_state, "unknown"),
            duration_s=(execution.last_update_time_since_epoch
                        - execution.create_time_since_epoch) / 1000.0)
        events = store.get_events_by_execution_ids([execution.id])
        out_ids = [e.artifact_id for e in events
                   if e.type in (metadata_store_pb2.Event.OUTPUT, metadata_store_pb2.Event.DECLARED_OUTPUT)]
        for artifact in store.get_artifacts_by_id(out_ids):
            type_name = store.get_artifact_types_by_id([artifact.type_id])[0].name
            stage.outputs[type_name] = dict(custom_properties(artifact), uri=artifact.uri)
        stages.append(stage)
    return RunReport(run_id=run.name, stages=stages)


DATA_COUNTERS = ("files_listed", "files_packed", "files_skipped_empty", "files_skipped_unreadable",
                 "files_skipped_binary", "files_skipped_not_utf8", "files_skipped_too_large",
                 "bytes_read", "bytes_packed", "bytes_quarantined", "sequences_train",
                 "sequences_eval", "tokens_real", "tokens_padding", "real_token_fraction")


TRAINING_FIGURES = ("parameter_count", "flops_per_token", "num_replicas", "precision", "steps",
                    "resumed_from_step", "skipped_steps", "tokens_seen", "tokens_per_second",
                    "final_loss", "eval_loss", "unigram_baseline_loss", "eval_accuracy")


def format_report(report: RunReport) -> str:
    lines = [f"run {report.run_id}", f"  {'stage':<28} {'state':<10} {'seconds':>8}"]
    for stage in report.stages:
        lines.append(f"  {stage.node:<28} {stage.state:<10} {stage.duration_s:>8.1f}")
    for stage in report.stages:
        examples = stage.outputs.get("Examples")
        if examples and "files_listed" in examples:
            lines.append(f"data ({stage.node}): {examples.get('input')} -> {examples['uri']}")
            for name in DATA_COUNTERS:
                lines.append(f"  {name:<28} {examples.get(name)}")
            lines.append(f"  {'quarantine manifest':<28} {examples.get('quarantine_manifest')}")
        model = stage.outputs.get("Model")
        if model and "steps" in model:
            lines.append(f"training ({stage.node}): {model['uri']}")
            for name in TRAINING_FIGURES:
                value = model.get(name)
                lines.append(f"  {name:<28} {value:.4f}" if isinstance(value, float)
                             else f"  {name:<28} {value}")
    return "\n".join(lines)
