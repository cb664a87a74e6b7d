"""The everyday lineage questions, answered as plain data (dicts and lists, JSON-ready)."""

from __future__ import annotations

import json

from components.evaluation import properties as eval_props
from components.model import properties as model_props
from components.push import properties as push_props
from components.text_example_gen import properties as examples_props
from components.tokenizer import properties as tokenizer_props
from components.tuner import properties as tuner_props
from components.validation import properties as validation_props
from components.common.errors import NotFoundError
from pipeline.lineage import record
from pipeline.lineage.store import Lineage, properties

# Properties worth showing per artifact type in a trace (others stay in --json).
KEY_PROPERTIES = {
    "PushedModel": (push_props.PUSHED, push_props.PUSHED_VERSION, push_props.PUSHED_DESTINATION, push_props.REASON, push_props.VARIANT),
    "ModelBlessing": (eval_props.BLESSED, eval_props.REASON, eval_props.CURRENT_MODEL_ID, eval_props.BASELINE_MODEL_ID, eval_props.SERVE_VARIANT),
    "Tokenizer": (tokenizer_props.KIND, tokenizer_props.MODEL_TYPE, tokenizer_props.VOCAB_SIZE, tokenizer_props.BYTES_PER_TOKEN, tokenizer_props.SAMPLE_BYTES,
                  tokenizer_props.SAMPLE_DOCUMENTS, tokenizer_props.MODEL_FILE),
    "ModelEvaluation": (eval_props.LOSS, eval_props.BITS_PER_BYTE, eval_props.PERPLEXITY,
                        eval_props.ACCURACY, eval_props.EXAMPLES, eval_props.TOKENS,
                        eval_props.BASELINE_LOSS, eval_props.BASELINE_BITS_PER_BYTE,
                        eval_props.VARIANTS, eval_props.SERVE_VARIANT) + tuple(
        eval_props.variant_property(variant, figure) for variant in ("float", "int8", "tflite")
        for figure in eval_props.VARIANT_FIGURES + eval_props.VARIANT_COUNTS
        + (eval_props.FIT_TO_SERVE, eval_props.VARIANT_REASON)),
    "Model": (model_props.STEPS, model_props.TOKENS_SEEN, model_props.FINAL_LOSS, model_props.EVAL_LOSS, model_props.EVAL_BITS_PER_BYTE,
              model_props.UNIGRAM_BASELINE_LOSS,
              model_props.PARAMETER_COUNT, model_props.TOKENS_PER_SECOND, model_props.PRECISION, model_props.NUM_REPLICAS,
              model_props.CONFIG_DIGEST, model_props.CODE_DIGEST, model_props.FINE_TUNED_FROM_MODEL_ID, model_props.TUNED_HYPERPARAMETERS),
    "HyperParameters": (tuner_props.OBJECTIVE, tuner_props.BEST_TRIAL, tuner_props.TRIALS_COMPLETED),
    "ModelRun": (),
    "Examples": (examples_props.FILES_LISTED, examples_props.FILES_READ, examples_props.DOCUMENTS_PACKED, examples_props.SEQUENCES_TRAIN, examples_props.SEQUENCES_EVAL,
                 examples_props.TOKENS_REAL, examples_props.BYTES_QUARANTINED, examples_props.QUARANTINE_MANIFEST),
    "Schema": (),
    "ExampleStatistics": (),
    "ExampleAnomalies": (),
}


def _duration_s(executions) -> float:
    if not executions:
        return 0.0
    return (max(e.last_update_time_since_epoch for e in executions)
            - min(e.create_time_since_epoch for e in executions)) / 1000.0


def artifact_record(lin: Lineage, artifact_id: int, full: bool = False) -> dict:
    artifact = lin.artifact(artifact_id)
    kind = lin.artifact_type(artifact)
    props = properties(artifact)
    shown = props if full else {k: props[k] for k in KEY_PROPERTIES.get(kind, ()) if k in props}
    return {"artifact_id": artifact.id, "type": kind, "uri": artifact.uri, "properties": shown}


def run_summary(lin: Lineage, run) -> dict:
    """One run: start, duration, overall state, per-stage states, pushed version, why it ran and
    its key figures (eval loss, bits per byte), read from the run's own executions and outputs."""
    executions = lin.executions_of(run)
    lin.prefetch([e.id for e in executions])
    stages = {lin.node_of.get(e.id, str(e.id)): lin.state(e) for e in executions
              if not lin.node_of.get(e.id, "").endswith("resolver")}
    state = _overall_state(set(stages.values()))
    pushed, figures = None, {}
    for execution in executions:
        node = lin.node_of.get(execution.id, "")
        if node.endswith(("resolver", "importer")):  # re-emitted artifacts of earlier runs
            continue
        for ids in lin.outputs(execution.id).values():
            for artifact_id in ids:
                artifact = lin.artifact(artifact_id)
                kind, props = lin.artifact_type(artifact), properties(artifact)
                if kind == "PushedModel" and props.get(push_props.PUSHED) == 1 \
                        and lin.state(execution) == "complete":
                    pushed = props.get(push_props.PUSHED_VERSION)
                elif kind == "ModelEvaluation":
                    figures.update(eval_loss=props.get(eval_props.LOSS),
                                   bits_per_byte=props.get(eval_props.BITS_PER_BYTE))
                elif kind == "Model" and model_props.EVAL_LOSS in props:
                    figures.setdefault("eval_loss", props.get(model_props.EVAL_LOSS))
                    figures.setdefault("bits_per_byte", props.get(model_props.EVAL_BITS_PER_BYTE))
    start = min((e.create_time_since_epoch for e in executions), default=run.create_time_since_epoch)
    run_props = properties(run)
    return {"run_id": run.name, "start_ms": start, "duration_s": _duration_s(executions),
            "state": state, "stages": stages, "pushed_version": pushed,
            "why": run_props.get(record.RUN_WHY), "eval_loss": figures.get("eval_loss"),
            "bits_per_byte": figures.get("bits_per_byte"),
            "run_dir": run_props.get(record.RUN_DIR), "log": run_props.get(record.RUN_LOG),
            "trackers": trackers_of(run_props)}


def trackers_of(run_props: dict) -> dict:
    """{backend: tracker run id} recorded on a run (record.RUN_TRACKERS); {} without any."""
    try:
        return dict(json.loads(run_props.get(record.RUN_TRACKERS) or "{}"))
    except (TypeError, ValueError):
        return {}


def _overall_state(states: set[str]) -> str:
    return ("failed" if "failed" in states else "abandoned" if "abandoned" in states
            else "preempted" if "preempted" in states
            else "running" if states & {"running", "new"} else "complete")


def run_state(lin: Lineage, run) -> str:
    """run_summary's state from the run's executions alone (one query): node names (to leave
    resolvers out) are read only for executions that are not complete or cached."""
    states = set()
    for execution in lin.executions_of(run):
        state = lin.state(execution)
        if state not in ("complete", "cached") and \
                lin.node_of.get(execution.id, "").endswith("resolver"):
            continue
        states.add(state)
    return _overall_state(states)


# How many runs one filtered page may examine: a filter on a rare state must not read the whole
# history in one request; the page says where it stopped and the next one continues there.
SCAN_PER_PAGE = 400


def list_runs(lin: Lineage, limit: int | None = 20, offset: int = 0,
              state: str | None = None) -> list[dict]:
    """Runs newest first: `limit` of them (None: all) from `offset`; with `state`, only runs in
    that state (see runs_page for a filter that tells where it stopped)."""
    if state is None:
        return [run_summary(lin, run) for run in lin.runs_page(offset, limit)]
    return runs_page(lin, limit or 20, offset, state)["runs"]


def runs_page(lin: Lineage, limit: int = 20, offset: int = 0, state: str | None = None) -> dict:
    """A page of runs for the UI: {"runs", "next_offset" (None at the end), "examined"}.
    Unfiltered: runs offset..offset+limit. Filtered by state: the matches among at most
    SCAN_PER_PAGE runs from `offset`, and the offset where the next page continues."""
    if state is None:
        runs = lin.runs_page(offset, limit + 1)
        return {"runs": [run_summary(lin, r) for r in runs[:limit]], "examined": len(runs[:limit]),
                "next_offset": offset + limit if len(runs) > limit else None}
    matches, position = [], offset
    candidates = lin.runs_page(offset, SCAN_PER_PAGE)
    for run in candidates:
        position += 1
        if run_state(lin, run) == state:
            matches.append(run_summary(lin, run))
            if len(matches) == limit:
                break
    more = len(candidates) == SCAN_PER_PAGE or position < offset + len(candidates)
    return {"runs": matches, "examined": position - offset, "next_offset": position if more else None}


def execution_record(lin: Lineage, execution_id: int) -> dict:
    execution = lin.execution(execution_id)
    return {"execution_id": execution_id, "node": lin.node_of.get(execution_id, execution.name),
            "state": lin.state(execution), "runs": lin.runs_of_execution(execution_id)}


def raw_input(lin: Lineage, examples_id: int) -> dict:
    """The raw data behind an Examples artifact: path/glob, file count, content fingerprint."""
    props = properties(lin.artifact(examples_id))
    if examples_props.INPUT_FINGERPRINT in props:  # TextExampleGen
        return {"input": props.get(examples_props.INPUT), "root": props.get(examples_props.INPUT_ROOT),
                "files": props.get(examples_props.FILES_LISTED), "fingerprint": props.get(examples_props.INPUT_FINGERPRINT)}
    producer = lin.producer(examples_id)  # TFX's file-based ExampleGens keep it on the execution
    exec_props = properties(lin.execution(producer)) if producer else {}
    return {"input": exec_props.get("input_base"), "root": exec_props.get("input_base"),
            "files": None, "fingerprint": exec_props.get(examples_props.INPUT_FINGERPRINT)}


# A list of executions sharing one artifact (a history of cached runs, a sweep over fixed data)
# is shown by its first and last few and a count: answers stay short and read the same number
# of records at 10,000 runs as at 10. `page` N (1-based) lists the Nth PAGE_SIZE of them instead,
# so every one can be listed, a bounded page at a time.
SHOWN_AT_EACH_END = 3
PAGE_SIZE = 50


def first_and_last(ids: list[int], shown: int = SHOWN_AT_EACH_END) -> list[int]:
    return ids if len(ids) <= 2 * shown else ids[:shown] + ids[-shown:]


def paged(lin: Lineage, ids: list[int], page: int | None = None) -> dict:
    """{"count", "executions"}: records of the first and last few of ids, or (page N) of the
    Nth PAGE_SIZE of them, with "page", "pages" and "per_page" (a page past the last is empty)."""
    if page is None:
        return {"count": len(ids), "executions": [execution_record(lin, e)
                                                  for e in first_and_last(ids)]}
    if page < 1:
        raise NotFoundError(f"page {page}: pages are numbered from 1")
    shown = ids[(page - 1) * PAGE_SIZE:page * PAGE_SIZE]
    return {"count": len(ids), "executions": [execution_record(lin, e) for e in shown],
            "page": page, "pages": -(-len(ids) // PAGE_SIZE), "per_page": PAGE_SIZE}


def reused_by(lin: Lineage, artifact_id: int, page: int | None = None) -> dict:
    """The cached executions that re-emitted the artifact after its producer made it:
    {"count", "executions": records of the first and last few, or of one page}."""
    return paged(lin, lin.emitters(artifact_id)[1:], page)


def anomalies_for(lin: Lineage, examples_id: int) -> list[dict]:
    """Examples -> StatisticsGen -> statistics -> ExampleValidator -> anomalies (by events), as
    validated in the run that made the examples (read from that run's executions: the same
    reads with 10 runs re-using the examples as with 10,000). Examples made outside a run are
    looked up through every execution that read them and ran (the first and last few)."""
    in_run = _executions_of_producing_run(lin, examples_id)

    def readers(artifact_id: int) -> list[int]:
        if in_run is None:
            return first_and_last(lin.readers(artifact_id)[0])
        return [e.id for e in in_run if artifact_id in sum(lin.inputs(e.id).values(), [])]

    found = []
    for stats_exec in [e for e in readers(examples_id) if lin.node_of.get(e) == "StatisticsGen"]:
        for stats_id in sum(lin.outputs(stats_exec).values(), []):
            for validator in readers(stats_id):
                for anomalies_id in lin.outputs(validator).get("anomalies", []):
                    rec = artifact_record(lin, anomalies_id)
                    blessed = properties(lin.artifact(anomalies_id)).get(validation_props.ANOMALIES_BLESSED)
                    rec["properties"]["anomalies_found"] = _anomalies_summary(rec["uri"], blessed)
                    if rec not in found:
                        found.append(rec)
    return found


def _executions_of_producing_run(lin: Lineage, artifact_id: int) -> list | None:
    """The executions of the run whose execution made the artifact (events prefetched), or None
    when no run context holds that execution."""
    producer = lin.producer(artifact_id)
    runs = [c for c in lin.contexts_of_execution(producer) if c.type_id in lin.run_type_ids] \
        if producer else []
    if not runs:
        return None
    executions = lin.executions_of(runs[0])
    lin.prefetch([e.id for e in executions])
    return executions


def _anomalies_summary(uri: str, blessed) -> str:
    try:
        from components.storage.splits import split_names
        from components.validation.anomalies import read_anomalies
        anomalies = read_anomalies(uri, split_names(uri))
        return "none" if not anomalies else "; ".join(str(a) for a in anomalies)
    except OSError:
        return f"unreadable (blessed={blessed})"


def trace(lin: Lineage, target: str, down: bool = False, page: int | None = None) -> dict:
    """Walk from TARGET upstream (producers and their inputs) or downstream (consumers and their
    outputs). Each step: the artifact and the execution that made (or used) it; `page`: the
    Nth page of each step's reusers (up) or readers (down) instead of the first and last few."""
    start = lin.find_artifact(target)
    steps, seen = [], set()
    frontier = [(start.id, 0)]
    while frontier:
        artifact_id, depth = frontier.pop(0)
        if artifact_id in seen:
            continue
        seen.add(artifact_id)
        rec = trace_step(lin, artifact_id, down, page)
        rec["depth"] = depth
        # Down: every reader that ran, not only the shown ones (what the 4th of 7 made is below
        # too); a cached reader re-emits what an earlier reader that ran made from this artifact.
        if down:
            for execution_id in lin.readers(artifact_id)[0]:
                for ids in lin.outputs(execution_id).values():
                    frontier += [(i, depth + 1) for i in ids]
        elif rec["made_by"]:
            for key in sorted(rec["made_by"]["inputs"]):
                frontier += [(i, depth + 1) for i in rec["made_by"]["inputs"][key]]
        steps.append(rec)
    result = {"target": target, "direction": "down" if down else "up", "steps": steps}
    made = steps[0].get("made_by") if steps else None
    if made and made["runs"]:   # the tracker runs of the run that made the target, if tracked
        trackers = trackers_of(properties(lin.run(made["runs"][0])))
        if trackers:
            result["trackers"] = {"run": made["runs"][0], "ids": trackers}
    if page is not None:
        result["page"] = page
    if down:
        result["models"] = [s["artifact_id"] for s in steps if s["type"] == "Model"]
        if steps and "fine_tuned_children" in steps[0]:
            result["fine_tuned_children"] = steps[0]["fine_tuned_children"]
    return result


def trace_step(lin: Lineage, artifact_id: int, down: bool = False, page: int | None = None
               ) -> dict:
    """One step of trace: the artifact, and who made it (up: its producer, the cached runs that
    reused it, the producer's inputs) or who read it (down: the readers that ran and the
    cached ones), with what its type adds (fine-tuning, raw input, anomalies)."""
    rec = artifact_record(lin, artifact_id)
    if down:
        ran, cached = lin.readers(artifact_id)
        used = paged(lin, ran, page)
        rec["used_by"] = used["executions"]
        rec["used_by_not_shown"] = 0 if page else len(ran) - len(rec["used_by"])
        if page:
            rec["used_by_page"] = {k: used[k] for k in ("count", "page", "pages", "per_page")}
        rec["cached_readers"] = paged(lin, cached, page)
    else:
        producer = lin.producer(artifact_id)
        rec["made_by"] = execution_record(lin, producer) if producer else None
        if producer:
            rec["made_by"]["reused_by"] = reused_by(lin, artifact_id, page)
            rec["made_by"]["inputs"] = lin.inputs(producer)
            if rec["type"] == "ModelBlessing":  # the evaluation written beside the blessing
                for other in lin.outputs(producer).get("evaluation", []):
                    rec["evaluation"] = artifact_record(lin, other)
    if rec["type"] == "Model":
        fine_tuning(lin, artifact_id, rec, down)
    if rec["type"] == "Examples":
        rec["raw_input"] = raw_input(lin, artifact_id)
        rec["anomalies"] = anomalies_for(lin, artifact_id)
    return rec


def fine_tuning(lin: Lineage, model_id: int, rec: dict, down: bool) -> None:
    """Warm starts: the parent Model that a Trainer read as `base_model` (up), or the Models
    trained from this one (down)."""
    if down:
        rec["fine_tuned_children"] = sorted(
            child for execution in lin.readers(model_id)[0]  # cached ones re-emit a child
            if model_id in lin.inputs(execution).get("base_model", [])
            for child in lin.outputs(execution).get("model", []))
    else:
        producer = lin.producer(model_id)
        parents = lin.inputs(producer).get("base_model", []) if producer else []
        if parents:
            rec["fine_tuned_from"] = parents[0]


def graph(lin: Lineage, ref: str) -> dict:
    """Nodes (executions and artifacts) and edges (artifact -> execution for inputs, execution ->
    artifact for outputs) of one run."""
    run = lin.run(ref)
    nodes, edges, seen = [], [], set()

    def add_artifact(artifact_id):
        key = f"a{artifact_id}"
        if key not in seen:
            seen.add(key)
            artifact = lin.artifact(artifact_id)
            nodes.append({"id": key, "kind": "artifact", "label": f"{lin.artifact_type(artifact)} #{artifact_id}"})
        return key

    for execution in lin.executions_of(run):
        key = f"e{execution.id}"
        seen.add(key)
        nodes.append({"id": key, "kind": "execution", "state": lin.state(execution),
                      "label": f"{lin.node_of.get(execution.id, execution.id)} ({lin.state(execution)})"})
        for name, ids in lin.inputs(execution.id).items():
            for artifact_id in ids:
                edges.append({"from": add_artifact(artifact_id), "to": key, "label": name})
        for name, ids in lin.outputs(execution.id).items():
            for artifact_id in ids:
                edges.append({"from": key, "to": add_artifact(artifact_id), "label": name})
    return {"run_id": run.name, "nodes": nodes, "edges": edges}


def why(lin: Lineage, ref: str | None) -> dict:
    """The failed (abandoned, preempted) stage of a run: root-cause message, log location, its
    inputs."""
    run = lin.run(ref)
    failed = [e for e in lin.executions_of(run)
              if lin.state(e) in ("failed", "abandoned", "preempted")]
    run_props = properties(run)
    result = {"run_id": run.name, "log": run_props.get(record.RUN_LOG),
              "run_dir": run_props.get(record.RUN_DIR), "failed": []}
    for execution in failed:
        props = properties(execution)
        abandoned = lin.state(execution) == "abandoned"
        result["failed"].append({
            "node": lin.node_of.get(execution.id, execution.name), "execution_id": execution.id,
            "state": lin.state(execution),
            "error_type": "abandoned" if abandoned else props.get(record.ERROR_TYPE),
            "error": (props.get(record.ABANDONED_BY, "left running by a process that is no longer "
                                                     "alive (killed, or the machine went down)")
                      if abandoned else props.get(record.ERROR)
                      or "(no error recorded: the run was not started by `bigtrain run`; see the "
                         "orchestrator's logs)"),
            "log": props.get(record.RUN_LOG) or result["log"],
            "inputs": [artifact_record(lin, i) for ids in lin.inputs(execution.id).values() for i in ids]})
    return result
