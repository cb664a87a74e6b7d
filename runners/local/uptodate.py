"""Up-to-date check for `bigtrain run`, in plain Python (no TFX, no TensorFlow, no Beam imports):
a complete run records what it depended on (its config without the home, a signature of its
input files, digests of bigtrain's code and the versions of the libraries that compute); when the
home's last run is complete, recorded the same, and its outputs are still on disk, the run is up
to date and the pipeline is not started. Anything else runs the pipeline (TFX's per-stage cache
still applies) and the reasons are printed and kept on the run."""

from __future__ import annotations

import json
from importlib import metadata as importlib_metadata

from components import config as config_lib
from components.storage import fs
from components.storage.digest import file_digest, source_files
from components.storage.listing import input_signature

PACKAGES = ("pipeline", "components", "runners", "schemas")
LIBRARIES = ("tfx", "tensorflow", "keras", "apache-beam", "ml-metadata", "tfx-bsl",
             "tensorflow-data-validation")


def code_digests() -> dict[str, str]:
    """{relative path: sha256[:16]} of bigtrain's sources and schemas, plus library versions."""
    out = {label: file_digest(path)[:16]
           for label, path in source_files(*PACKAGES, suffixes=(".py", ".pbtxt"))}
    for library in LIBRARIES:
        try:
            out[f"library {library}"] = importlib_metadata.version(library)
        except importlib_metadata.PackageNotFoundError:
            out[f"library {library}"] = "absent"
    return out


def inputs_key(config: config_lib.Config, input_fingerprint: str) -> dict:
    """What a run depends on. `input_fingerprint`: the run's one fingerprint of data.input (the
    same value the data stages key their cache on)."""
    from components.evaluation.held_out_sets import sets_cache_key
    from components.training.hf_source import init_from_fingerprint
    settings = config_lib.to_dict(config)
    settings["paths"].pop("home", None)  # the home is where we look, not an input
    key = {"config": settings, "input": input_signature(config.data, input_fingerprint),
           "code": code_digests(), "eval_sets": sets_cache_key(config.eval)}
    warm_start = init_from_fingerprint(config)
    if warm_start is not None:  # train.init_from=hf:DIR: its files are an input too
        key["init_from"] = warm_start
    return key


def _flat(value, prefix=""):
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}.{key}" if prefix else key))
        return out
    return {prefix: value}


def changes(before: dict, after: dict) -> list[str]:
    """What differs between two inputs keys, in words ([] = nothing)."""
    reasons = []
    a, b = _flat(before.get("config", {})), _flat(after.get("config", {}))
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            reasons.append(f"config {key}: {a.get(key)!r} -> {b.get(key)!r}")
    if before.get("input") != after.get("input"):
        reasons.append("input files changed (added, removed, resized or modified)")
    if before.get("eval_sets") != after.get("eval_sets"):
        reasons.append("eval.sets files changed (their bytes: a content digest)")
    if before.get("init_from") != after.get("init_from"):
        reasons.append("train.init_from files changed (added, removed, resized or modified)")
    code_a, code_b = before.get("code", {}), after.get("code", {})
    changed = sorted(k for k in set(code_a) | set(code_b) if code_a.get(k) != code_b.get(k))
    if changed:
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        reasons.append(f"code changed: {shown}")
    return reasons


def last_run_of(lin, pipeline_name: str):
    """The newest run context of this pipeline (a shared MySQL store holds other pipelines too),
    read newest first in growing pages: the newest run is one small page at 10,000 runs."""
    type_names = {t.id: t.name for t in lin.store.get_context_types()}
    offset, limit = 0, 8
    while True:
        page = lin.runs_page(offset, limit)
        for run in page:
            executions = lin.executions_of(run)
            if not executions:
                continue
            contexts = lin.store.get_contexts_by_execution(executions[0].id)
            if any(type_names.get(c.type_id) == "pipeline" and c.name == pipeline_name
                   for c in contexts):
                return run
        if len(page) < limit:
            return None
        offset, limit = offset + limit, limit * 4


def outputs_missing(lin, run) -> list[str]:
    """Outputs of the run's executions (and its pushed model) that are gone, local or remote
    (s3://, gs://: one existence check each through fs)."""
    from pipeline.lineage.store import properties
    missing = []
    for execution in lin.executions_of(run):
        for ids in lin.outputs(execution.id).values():
            for artifact_id in ids:
                artifact = lin.artifact(artifact_id)
                props = properties(artifact)
                # A PushedModel's own folder stays empty (the model is at pushed_destination), and
                # an object store has no empty folders: there only the destination is checked.
                paths = [] if "pushed" in props and fs.is_remote(artifact.uri) else [artifact.uri]
                destination = props.get("pushed_destination")
                if props.get("pushed") == 1 and destination:
                    paths.append(destination)
                missing += [p for p in paths if p and not fs.exists(p)]
    return missing


def check(lin, config: config_lib.Config, key: dict):
    """(last run or None, reasons to run). No reasons: up to date."""
    from pipeline.lineage import record
    from pipeline.lineage.store import properties
    run = last_run_of(lin, config.paths.pipeline_name)
    if run is None:
        return None, ["no earlier run of this pipeline in this home"]
    executions = lin.executions_of(run)
    states = {lin.state(e) for e in executions}
    if "Pusher" not in {lin.node_of.get(e.id) for e in executions}:  # e.g. a partial (--until) run
        return run, [f"the last run {run.name} stopped before the Pusher"]
    if states - {"complete", "cached"}:
        return run, [f"the last run {run.name} did not complete ({', '.join(sorted(states))})"]
    recorded = properties(run).get(record.INPUTS_KEY)
    if not recorded:
        return run, [f"the last run {run.name} recorded no inputs key (older bigtrain or another runner)"]
    reasons = changes(json.loads(recorded), key)
    missing = outputs_missing(lin, run)
    if missing:
        reasons.append(f"outputs of the last run are gone: {', '.join(missing[:3])}")
    return run, reasons
