"""The run report: what each stage of one pipeline run did, read back from ML Metadata.

For every stage: its state (ran / cached / failed), duration and key outputs; for a stage that ran,
why it could not be served from the cache (no earlier execution, which parameter or which input
changed). Traversal uses ids, contexts and events only (no MLMD filter queries)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ml_metadata.proto import metadata_store_pb2

from components.lineage.store import Lineage, changed_parameters, properties, value_of

Execution = metadata_store_pb2.Execution
STATE_WORDS = {Execution.COMPLETE: "ran", Execution.CACHED: "cached", Execution.FAILED: "failed",
               Execution.RUNNING: "running", Execution.NEW: "new", Execution.CANCELED: "canceled"}


@dataclass
class StageReport:
    node: str
    state: str
    duration_s: float
    execution_id: int
    outputs: dict[str, dict] = field(default_factory=dict)
    why: str = ""


@dataclass
class RunReport:
    run_id: str
    stages: list[StageReport]

    def stage(self, node: str) -> StageReport | None:
        return next((s for s in self.stages if s.node == node), None)

    def output(self, type_name: str) -> dict:
        for stage in self.stages:
            if type_name in stage.outputs:
                return stage.outputs[type_name]
        return {}


def custom_properties(obj) -> dict:
    return {key: value_of(value) for key, value in obj.custom_properties.items()}


def _baseline_id(lin: Lineage, execution_id: int):
    for ids in lin.outputs(execution_id).values():
        for artifact_id in ids:
            artifact = lin.artifact(artifact_id)
            if "baseline_model_id" in artifact.custom_properties:
                return artifact.custom_properties["baseline_model_id"].int_value
    return None


def why_ran(lin: Lineage, execution, previous) -> str:
    """Why this execution was not served from the cache."""
    if previous is None:
        return "first execution of this stage"
    reasons = [f"{key}: {before!r} -> {after!r}" for key, before, after in
               changed_parameters(custom_properties(previous), custom_properties(execution))]
    before, after = lin.inputs(previous.id), lin.inputs(execution.id)
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            reasons.append(f"input {key}: artifacts {before.get(key, [])} -> {after.get(key, [])}")
    # MLMD keeps one event per (artifact, type): a baseline that is the candidate itself leaves no
    # separate input event, so the baseline is read from the blessing the stage wrote.
    baseline_before, baseline_after = _baseline_id(lin, previous.id), _baseline_id(lin, execution.id)
    if baseline_before != baseline_after:
        reasons.append(f"baseline model: {baseline_before or 'none'} -> {baseline_after or 'none'}")
    if not reasons and previous.last_known_state == Execution.FAILED:
        return "previous execution failed"
    return "; ".join(reasons) or "same inputs and parameters (cache disabled or outputs gone)"


def run_report(store, run_id: str | None = None) -> RunReport:
    """The newest run (or run_id): stages in execution order, with outputs and why they ran."""
    lin = Lineage(store)
    run = lin.run(run_id or "latest")
    by_node: dict[str, list[int]] = {}
    for execution_id, node in sorted(lin.node_of.items()):
        by_node.setdefault(node, []).append(execution_id)
    stages = []
    for execution in lin.executions_of(run):
        node = lin.node_of.get(execution.id, execution.name or str(execution.id))
        earlier = [i for i in by_node.get(node, []) if i < execution.id]
        stage = StageReport(
            node=node, state=STATE_WORDS.get(execution.last_known_state, "unknown"),
            duration_s=(execution.last_update_time_since_epoch
                        - execution.create_time_since_epoch) / 1000.0,
            execution_id=execution.id)
        if execution.last_known_state in (Execution.COMPLETE, Execution.FAILED) \
                and not node.endswith("resolver"):
            stage.why = why_ran(lin, execution, lin.execution(earlier[-1]) if earlier else None)
        for ids in lin.outputs(execution.id).values():
            for artifact_id in ids:
                artifact = lin.artifact(artifact_id)
                stage.outputs[lin.artifact_type(artifact)] = dict(
                    properties(artifact), uri=artifact.uri, id=artifact.id)
        stages.append(stage)
    return RunReport(run_id=run.name, stages=stages)


def _fmt(value, spec: str = ".4f") -> str:
    """Floats formatted; non-finite figures arrive from MLMD as text ('nan') and pass through."""
    return format(value, spec) if isinstance(value, float) else str(value)


def summarize(stage: StageReport) -> str:
    """One line of key outputs per stage."""
    o = stage.outputs
    if "Examples" in o and "files_listed" in o["Examples"]:
        e = o["Examples"]
        skipped = e["files_listed"] - e["files_read"] + sum(
            v for k, v in e.items() if k.startswith("documents_skipped_"))
        return (f"{e['files_read']} files, {e['documents_packed']} documents -> "
                f"{e['sequences_train']} train / {e['sequences_eval']} eval sequences, {skipped} "
                f"quarantined, {e['real_token_fraction']:.2%} real tokens")
    if "Schema" in o and "curated_schema" in o["Schema"]:
        return f"curated schema {o['Schema']['curated_schema']} for seq_len {o['Schema'].get('seq_len')}"
    if "ExampleStatistics" in o:
        splits = str(o["ExampleStatistics"].get("split_names", "")).strip("[]").replace('"', "")
        return f"statistics of the {splits} splits"
    if "ExampleAnomalies" in o:
        return "anomalies checked (see gate)"
    if stage.node == "AnomaliesGate":
        return {"ran": "no anomalies", "cached": "no anomalies", "failed": "anomalies found"}.get(stage.state, "")
    if "Model" in o and "steps" in o["Model"]:
        m = o["Model"]
        return (f"{m['steps']} steps, eval loss {_fmt(m['eval_loss'])} (byte-unigram "
                f"{_fmt(m['unigram_baseline_loss'])}), {_fmt(m['tokens_per_second'], '.0f')} tokens/s")
    if "ModelBlessing" in o:
        return o["ModelBlessing"].get("reason", "")
    if "PushedModel" in o:
        p = o["PushedModel"]
        if p.get("pushed") == 1:
            return f"pushed version {p.get('pushed_version')} -> {p.get('pushed_destination')}"
        return f"not pushed: {p.get('reason', '')}"
    if "Model" in o:
        return f"baseline: model {o['Model']['id']}"
    return ""


DATA_COUNTERS = ("files_listed", "files_read", "files_skipped_not_regular_file",
                 "files_skipped_unreadable", "documents_packed", "documents_skipped_empty",
                 "documents_skipped_binary", "documents_skipped_not_utf8",
                 "documents_skipped_too_large", "documents_skipped_invalid_json",
                 "documents_skipped_missing_field", "documents_skipped_not_string",
                 "documents_skipped_truncated_input", "bytes_read", "bytes_packed",
                 "bytes_quarantined", "bytes_separators", "sequences_train", "sequences_eval",
                 "tokens_real", "tokens_padding", "real_token_fraction")
TRAINING_FIGURES = ("parameter_count", "flops_per_token", "num_replicas", "precision", "steps",
                    "resumed_from_step", "skipped_steps", "tokens_seen", "tokens_per_second",
                    "final_loss", "eval_loss", "unigram_baseline_loss", "eval_accuracy")
EVAL_FIGURES = ("loss", "perplexity", "accuracy", "examples", "tokens", "baseline_loss")


def _section(title: str, props: dict, names) -> list[str]:
    lines = [title]
    for name in names:
        if name in props:
            value = props[name]
            if name.endswith("_fraction"):
                lines.append(f"  {name:<26} {value:.4%}")
            else:
                lines.append(f"  {name:<26} {value:.4f}" if isinstance(value, float) else f"  {name:<26} {value}")
    return lines


def format_report(report: RunReport) -> str:
    width = max([len(s.node) for s in report.stages] + [5])
    lines = [f"run {report.run_id}",
             f"  {'stage':<{width}}  {'state':<7} {'seconds':>8}  key outputs"]
    for stage in report.stages:
        lines.append(f"  {stage.node:<{width}}  {stage.state:<7} {stage.duration_s:>8.1f}  {summarize(stage)}")
    reasons = [(s.node, s.why) for s in report.stages if s.why]
    if reasons:
        lines.append("why stages ran (instead of being cached):")
        lines += [f"  {node}: {why}" for node, why in reasons]
    examples = report.output("Examples")
    if "files_listed" in examples:
        lines += _section(f"data: {examples.get('input')} -> {examples['uri']}", examples, DATA_COUNTERS)
        lines.append(f"  {'quarantine manifest':<26} {examples.get('quarantine_manifest')}")
    model = next((s.outputs["Model"] for s in report.stages
                  if "Model" in s.outputs and "steps" in s.outputs["Model"]), {})
    if model:
        lines += _section(f"training: {model['uri']}", model, TRAINING_FIGURES)
    evaluation = report.output("ModelEvaluation")
    if evaluation:
        lines += _section(f"evaluation: {evaluation['uri']}", evaluation, EVAL_FIGURES)
        lines.append(f"  {'decision':<26} {report.output('ModelBlessing').get('reason', '')}")
    pushed = report.output("PushedModel")
    if pushed:
        lines.append("push: " + (f"version {pushed.get('pushed_version')} at {pushed.get('pushed_destination')}"
                                 if pushed.get("pushed") == 1 else f"nothing pushed ({pushed.get('reason', '')})"))
    return "\n".join(lines)
