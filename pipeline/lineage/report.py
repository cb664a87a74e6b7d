"""The run report: what each stage of one pipeline run did, read back from ML Metadata.

For every stage: its state (complete / cached / failed / abandoned / preempted, the words of
store.STATE_WORDS and store.py's two more),
duration and key outputs; for a stage that ran, why it could not be served from the cache (no
earlier execution, which parameter or which input changed). Only the run's own executions and their
events are read (by the run's context id), never "the newest" anything: a report is right even
when it is written long after the run."""

from __future__ import annotations

from dataclasses import dataclass, field

from ml_metadata.proto import metadata_store_pb2

from components.evaluation import properties as eval_props
from components.model import properties as model_props
from components.push import properties as push_props
from components.text_example_gen import properties as examples_props
from components.tokenizer import properties as tokenizer_props
from components.tuner import properties as tuner_props
from components.validation import properties as validation_props
from components.tuner import summary as tuning_summary
from pipeline.lineage import record
from pipeline.lineage.report_data import (cleaning_lines, placement_of, placement_section,
                                          sources_section)
from pipeline.lineage.params import changed_parameters
from pipeline.lineage.standing import compressor_standing, document_standing
from pipeline.lineage.store import ABANDONED, PREEMPTED, Lineage, properties

Execution = metadata_store_pb2.Execution


@dataclass
class StageReport:
    node: str
    state: str
    duration_s: float
    execution_id: int
    outputs: dict[str, dict] = field(default_factory=dict)
    why: str = ""
    note: str = ""  # e.g. who recorded the stage abandoned


@dataclass
class RunReport:
    run_id: str
    stages: list[StageReport]
    why_run: str = ""  # what changed since the last complete run (recorded by `bigtrain run`)
    beam_placement: list[str] = field(default_factory=list)  # where each Beam stage ran, and why

    def stage(self, node: str) -> StageReport | None:
        return next((s for s in self.stages if s.node == node), None)

    def output(self, type_name: str) -> dict:
        # Resolvers and importers re-emit existing artifacts (baseline, warm-start parent).
        for stage in sorted(self.stages, key=lambda s: reemits(s.node)):
            if type_name in stage.outputs:
                return stage.outputs[type_name]
        return {}


def reemits(node: str) -> bool:
    """Nodes that output existing artifacts (resolvers, importers), not new ones of this run."""
    return node.endswith(("resolver", "importer"))


def _baseline_id(lin: Lineage, execution_id: int):
    for ids in lin.outputs(execution_id).values():
        for artifact_id in ids:
            artifact = lin.artifact(artifact_id)
            if "baseline_model_id" in artifact.custom_properties:
                return artifact.custom_properties[eval_props.BASELINE_MODEL_ID].int_value
    return None


def why_ran(lin: Lineage, execution, previous) -> str:
    """Why this execution was not served from the cache."""
    if previous is None:
        return "first execution of this stage"
    reasons = [f"{key}: {before!r} -> {after!r}" for key, before, after in
               changed_parameters(properties(previous, custom_only=True),
                                  properties(execution, custom_only=True))]
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


def run_report(store, run_id: str | None = None, live_writer: bool | None = None,
               lineage: Lineage | None = None) -> RunReport:
    """Run run_id (or the newest run): stages in execution order, with outputs and why they ran.
    lineage: an open Lineage of the store to reuse (its caches), e.g. a UI page's."""
    lin = lineage or Lineage(store, live_writer=live_writer)
    run = lin.run(run_id or "latest")
    stages = []
    for execution in lin.executions_of(run):
        node = lin.node_of.get(execution.id, execution.name or str(execution.id))
        stage = StageReport(
            node=node, state=lin.state(execution),
            duration_s=(execution.last_update_time_since_epoch
                        - execution.create_time_since_epoch) / 1000.0,
            execution_id=execution.id)
        if stage.state == ABANDONED:
            stage.note = properties(execution).get(
                record.ABANDONED_BY, "left running by a process that is no longer alive")
        if stage.state == PREEMPTED:
            stage.note = str(properties(execution).get(record.PREEMPTED, ""))
        if execution.last_known_state in (Execution.COMPLETE, Execution.FAILED) \
                and not reemits(node):
            stage.why = why_ran(lin, execution, lin.previous_execution(execution))
        for ids in lin.outputs(execution.id).values():
            for artifact_id in ids:
                artifact = lin.artifact(artifact_id)
                stage.outputs[lin.artifact_type(artifact)] = dict(
                    properties(artifact), uri=artifact.uri, id=artifact.id)
        stages.append(stage)
    return RunReport(run_id=run.name, stages=stages,
                     why_run=str(properties(run).get(record.RUN_WHY, "")),
                     beam_placement=placement_of(properties(run).get(record.BEAM_PLACEMENT)))


def _fmt(value, spec: str = ".4f") -> str:
    """Floats formatted; non-finite figures arrive from MLMD as text ('nan') and pass through."""
    return format(value, spec) if isinstance(value, float) else str(value)


def summarize(stage: StageReport) -> str:
    """One line of key outputs per stage."""
    o = stage.outputs
    if reemits(stage.node):
        return ", ".join(f"{kind} #{props['id']}" for kind, props in sorted(o.items())) or "nothing resolved"
    if "Examples" in o and examples_props.FILES_LISTED in o["Examples"]:
        e = o["Examples"]
        skipped = e[examples_props.FILES_LISTED] - e[examples_props.FILES_READ] + sum(
            v for k, v in e.items() if k.startswith("documents_skipped_"))
        return (f"{e[examples_props.FILES_READ]} files, {e[examples_props.DOCUMENTS_PACKED]} documents -> "
                f"{e[examples_props.SEQUENCES_TRAIN]} train / {e[examples_props.SEQUENCES_EVAL]} eval sequences, {skipped} "
                f"quarantined, {e[examples_props.REAL_TOKEN_FRACTION]:.2%} real tokens")
    if "Schema" in o and validation_props.CURATED_SCHEMA in o["Schema"]:
        return f"curated schema {o['Schema'][validation_props.CURATED_SCHEMA]} for seq_len {o['Schema'].get(validation_props.SEQ_LEN)}"
    if "ExampleStatistics" in o:
        splits = str(o["ExampleStatistics"].get("split_names", "")).strip("[]").replace('"', "")
        return f"statistics of the {splits} splits"
    if "ExampleAnomalies" in o:
        return "anomalies checked (see gate)"
    if stage.state == ABANDONED:
        return "abandoned: " + stage.note
    if stage.state == PREEMPTED:
        return "preempted: " + stage.note
    if stage.node == "AnomaliesGate":
        return {"complete": "no anomalies", "cached": "no anomalies", "failed": "anomalies found"}.get(stage.state, "")
    if reemits(stage.node):  # an existing model (baseline or warm-start parent): not the Trainer's figures
        role = "warm-start parent" if stage.node.startswith("base_model") else "baseline"
        if "Model" not in o:
            return f"no blessed model yet (no {role})"
        return f"{role}: model #{o['Model']['id']} ({o['Model']['uri']})"
    if "Model" in o and model_props.STEPS in o["Model"]:
        m = o["Model"]
        note = tuning_summary.model_lineage_note(m)
        bpb = (f", {_fmt(m[model_props.EVAL_BITS_PER_BYTE])} bits/byte" if model_props.EVAL_BITS_PER_BYTE in m else "")
        return (f"{m[model_props.STEPS]} steps, eval loss {_fmt(m[model_props.EVAL_LOSS])}{bpb} (unigram "
                f"{_fmt(m[model_props.UNIGRAM_BASELINE_LOSS])}), {_fmt(m[model_props.TOKENS_PER_SECOND], '.0f')} tokens/s"
                + (f", {m[model_props.SPIKE_ROLLBACKS]} spike rollback(s) skipping {m[model_props.SKIPPED_BATCHES]} "
                   f"batches" if m.get(model_props.SPIKE_ROLLBACKS) else "")
                + (f"; {note}" if note else ""))
    if "Tokenizer" in o and tokenizer_props.KIND in o["Tokenizer"]:
        t = o["Tokenizer"]
        return (f"{t[tokenizer_props.KIND]} {t.get(tokenizer_props.MODEL_TYPE, '')}, vocab {t.get(tokenizer_props.VOCAB_SIZE)}, "
                f"{_fmt(t.get(tokenizer_props.BYTES_PER_TOKEN))} bytes/token on the eval sample")
    if "TunerResults" in o and tuner_props.TRIALS in o["TunerResults"]:
        return tuning_summary.tuner_line(o["TunerResults"])
    if "ModelBlessing" in o:
        return o["ModelBlessing"].get(eval_props.REASON, "")
    if "PushedModel" in o:
        p = o["PushedModel"]
        if p.get(push_props.PUSHED) == 1:
            return f"pushed version {p.get(push_props.PUSHED_VERSION)} -> {p.get(push_props.PUSHED_DESTINATION)}"
        return f"not pushed: {p.get(push_props.REASON, '')}"
    if "Model" in o:
        return f"baseline: model {o['Model']['id']}"
    return ""


DATA_COUNTERS = (examples_props.FILES_LISTED, examples_props.FILES_READ,
                 *examples_props.FILES_SKIPPED_COUNTERS, examples_props.DOCUMENTS_PACKED,
                 *examples_props.DOCUMENTS_SKIPPED_COUNTERS,
                 examples_props.DOCUMENTS_FLAGGED_CONTAMINATED, examples_props.BYTES_READ,
                 examples_props.BYTES_PACKED, examples_props.BYTES_QUARANTINED, examples_props.BYTES_SEPARATORS, examples_props.BYTES_DUPLICATE,
                 examples_props.DOCUMENTS_SAMPLED_OUT, examples_props.BYTES_SAMPLED_OUT, examples_props.DOCUMENTS_REPEATED,
                 examples_props.SEQUENCES_TRAIN, examples_props.SEQUENCES_EVAL,
                 examples_props.TOKENS_REAL, examples_props.TOKENS_PADDING, examples_props.REAL_TOKEN_FRACTION)
TRAINING_FIGURES = (model_props.PARAMETER_COUNT, model_props.FLOPS_PER_TOKEN, model_props.NUM_REPLICAS, model_props.PRECISION, model_props.STEPS,
                    model_props.RESUMED_FROM_STEP, model_props.SKIPPED_STEPS, model_props.SPIKE_ROLLBACKS, model_props.SKIPPED_BATCHES,
                    model_props.TOKENS_SEEN, model_props.TOKENS_PER_SECOND,
                    model_props.FINAL_LOSS, model_props.EVAL_LOSS, model_props.EVAL_LOSS_STANDARD_ERROR,
                    model_props.EVAL_SAMPLE_SEQUENCES, model_props.EVAL_BITS_PER_BYTE, model_props.ZLIB9_BITS_PER_BYTE,
                    model_props.LZMA9_BITS_PER_BYTE, model_props.UNIGRAM_BASELINE_LOSS, model_props.EVAL_ACCURACY,
                    model_props.FIRST_STEP_LOSS, model_props.VALIDATION_LOSS, model_props.VALIDATION_BITS_PER_BYTE,
                    model_props.VALIDATION_STEP, model_props.BEST_VALIDATION_LOSS, model_props.BEST_VALIDATION_STEP,
                    model_props.KEPT_BEST_STEP, model_props.INIT_FROM, model_props.FINE_TUNED_FROM_MODEL_ID, model_props.FROZEN_PARAMETERS,
                    model_props.TUNED_HYPERPARAMETERS)
EVAL_FIGURES = (eval_props.LOSS, eval_props.LOSS_STANDARD_ERROR, eval_props.SAMPLE_SEQUENCES, eval_props.BITS_PER_BYTE,
                eval_props.PERPLEXITY, eval_props.ACCURACY, eval_props.EXAMPLES, eval_props.TOKENS,
                eval_props.BASELINE_LOSS, eval_props.BASELINE_BITS_PER_BYTE)


# The Trainer's and the Evaluator's eval loss agree within this (nats/token) when they measure
# the same weights on the same sample: the in-memory model and its export run the same float ops
# in another graph (summation order), far below 1e-3.
AGREEMENT_TOLERANCE_NATS = 1e-3


def eval_agreement(model: dict, evaluation: dict, evaluated_model_id=None) -> str:
    """Whether the Trainer's eval loss (the in-memory model) and the Evaluator's (the exported
    float SavedModel) agree, or why they differ: another sample (its size), another model
    (evaluated_model_id: the blessing's current_model_id), or neither (then the export does not
    reproduce the trained model; under mixed precision the policy is named as the suspect).
    "" when either figure is missing."""
    trainer, evaluator = model.get(model_props.EVAL_LOSS), evaluation.get(eval_props.LOSS)
    if not isinstance(trainer, float) or not isinstance(evaluator, float):
        return ""
    delta, tolerance = evaluator - trainer, AGREEMENT_TOLERANCE_NATS
    figures = f"Trainer {trainer:.4f}, Evaluator {evaluator:.4f} nats/token"
    sizes = model.get(model_props.EVAL_SAMPLE_SEQUENCES), evaluation.get(eval_props.SAMPLE_SEQUENCES)
    if sizes[0] != sizes[1]:
        return (f"differ by {delta:+.4f} ({figures}): not the same sample (Trainer {sizes[0]}, "
                f"Evaluator {sizes[1]} sequences: eval.batch_size x eval.max_batches differed)")
    if evaluated_model_id is not None and model.get("id") is not None \
            and evaluated_model_id != model["id"]:
        return (f"differ by {delta:+.4f} ({figures}): not the same model (Trainer's model "
                f"#{model['id']}, the Evaluator measured #{evaluated_model_id})")
    if abs(delta) <= tolerance:
        return (f"agree ({figures}): the same sample of {sizes[0]} sequences and the same "
                f"weights, |difference| {abs(delta):.1e} <= {tolerance:g}")
    precision = model.get(model_props.PRECISION, "float32")
    suspect = (f"runtime.precision={precision}: the Trainer measured the model under that "
               f"policy, the Evaluator its export" if precision != "float32"
               else "the exported SavedModel does not reproduce the trained model")
    return (f"DIFFER by {delta:+.4f} ({figures}) on the same sample of {sizes[0]} sequences and "
            f"the same model, beyond {tolerance:g}: {suspect}")


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


def counters_section(title: str, props: dict, names, all_counters: bool = False) -> list[str]:
    """_section for counters: the ones at 0 are folded into one line ("all other counters 0")
    unless all_counters (`bigtrain run -v`); every non-zero one, and every figure that is not a
    whole number, keeps its line."""
    shown = [n for n in names if n in props and (all_counters or props[n] != 0
                                                 or not isinstance(props[n], int))]
    folded = sum(1 for n in names if n in props and n not in shown)
    lines = _section(title, props, shown)
    if folded:
        lines.append(f"  all other counters 0 ({folded}; `bigtrain run -v` or counters.json lists "
                     "every one)")
    return lines


def variants_section(evaluation: dict) -> list[str]:
    """Exported variants measured on the same eval sequences: loss, delta vs float (paired
    batch by batch, with its standard error and the batches it was measured on), size,
    token_logits latency on one eval batch, fit to serve (and which one is served)."""
    names = [n for n in str(evaluation.get(eval_props.VARIANTS, "")).split(",") if n]
    if not names:
        return []
    serve = evaluation.get(eval_props.SERVE_VARIANT)
    lines = ["  variants (same eval sequences; delta paired with float, +- its standard error; "
             "latency = token_logits on one eval batch):",
             f"    {'variant':<8} {'loss':>8} {'delta':>8} {'+-':>7} {'batches':>7} {'size':>10} "
             f"{'latency':>10}  fit to serve"]
    for name in names:
        get = lambda figure: evaluation.get(f"{name}_{figure}")
        size, latency, delta, se = get("size_bytes"), get("latency_ms"), get("loss_delta"), get("loss_delta_se")
        fit = "yes" if get("fit_to_serve") == 1 else f"NO ({get('reason')})"
        lines.append(f"    {name:<8} {_fmt(get('loss')):>8} "
                     f"{(format(delta, '+.4f') if isinstance(delta, float) else '-'):>8} "
                     f"{(format(se, '.4f') if isinstance(se, float) else '-'):>7} "
                     f"{(get('batches') if isinstance(get('batches'), int) else '-'):>7} "
                     f"{(f'{size / 1e6:.2f} MB' if isinstance(size, int) else '-'):>10} "
                     f"{(f'{latency:.1f} ms' if isinstance(latency, float) else '-'):>10}  "
                     f"{fit}{' (export.serve)' if name == serve else ''}")
    return lines


def format_report(report: RunReport, all_counters: bool = False) -> str:
    """The run report; all_counters: list the data stage's counters at 0 too (else folded)."""
    width = max([len(s.node) for s in report.stages] + [5])
    lines = [f"run {report.run_id}" + (f" (ran because: {report.why_run})" if report.why_run else ""),
             f"  {'stage':<{width}}  {'state':<9} {'seconds':>8}  key outputs"]
    for stage in report.stages:
        lines.append(f"  {stage.node:<{width}}  {stage.state:<9} {stage.duration_s:>8.1f}  {summarize(stage)}")
    reasons = [(s.node, s.why) for s in report.stages if s.why]
    if reasons:
        lines.append("why stages ran (instead of being cached):")
        lines += [f"  {node}: {why}" for node, why in reasons]
    lines += placement_section(report.beam_placement, {s.node: s.state for s in report.stages})
    examples = report.output("Examples")
    if examples_props.FILES_LISTED in examples:
        lines += counters_section(f"data: {examples.get(examples_props.INPUT)} -> {examples['uri']}",
                                  examples, DATA_COUNTERS, all_counters)
        lines.append(f"  {'quarantine manifest':<26} {examples.get(examples_props.QUARANTINE_MANIFEST)}")
        lines += cleaning_lines(examples)
        lines += sources_section(examples)
    lines += tuning_summary.trials_table(report.output("TunerResults"))
    model = next((s.outputs["Model"] for s in report.stages if not reemits(s.node)
                  and "Model" in s.outputs and "steps" in s.outputs["Model"]), {})
    if model:
        lines += _section(f"training: {model['uri']}", model, TRAINING_FIGURES)
        standing = compressor_standing(model)
        if standing:
            lines.append(f"  {'window sample':<26} {standing}")
    evaluation = report.output("ModelEvaluation")
    if evaluation:
        lines += _section(f"evaluation: {evaluation['uri']}", evaluation, EVAL_FIGURES)
        lines += document_standing(evaluation)
        lines += variants_section(evaluation)
        # The Evaluator's blessing (the resolver before it outputs the baseline's blessing).
        blessing = next((s.outputs.get("ModelBlessing", {}) for s in report.stages
                         if "ModelEvaluation" in s.outputs), {})
        agreement = eval_agreement(model, evaluation, blessing.get(eval_props.CURRENT_MODEL_ID))
        if agreement:
            lines.append(f"  {'trainer vs evaluator loss':<26} {agreement}")
        lines.append(f"  {'decision':<26} {blessing.get(eval_props.REASON, '')}")
    pushed = report.output("PushedModel")
    if pushed:
        lines.append("push: " + (f"version {pushed.get(push_props.PUSHED_VERSION)} at {pushed.get(push_props.PUSHED_DESTINATION)}"
                                 if pushed.get(push_props.PUSHED) == 1 else f"nothing pushed ({pushed.get(push_props.REASON, '')})"))
    return "\n".join(lines)
