"""What a model was trained on, from MLMD alone: the training-content summary of a pushed version
(`bigtrain lineage summary`) and which pushed versions an input file went into
(`bigtrain lineage trace --down FILE`).

Both read what the data stage recorded on its Examples artifact (components/text_example_gen/
component.py): the `sources` property (per source: input, format, files, bytes, mtime span,
documents / bytes / tokens per split, weight, epochs), every `documents_skipped_*` and
`files_skipped_*` counter (a new filter's counter appears here without code changes), and the
input listing file (`input_listing`: one JSON line per input file, components/storage/listing.py).
"""

from __future__ import annotations

import json
import os

from components.push import properties as push_props
from components.text_example_gen import properties as examples_props
from components.tokenizer import properties as tokenizer_props
from components.storage import fs
from components.common.errors import NotFoundError
from components.storage.fs import is_remote
from components.storage.listing import read_listing, same_file
from pipeline.lineage.store import Lineage, properties

# Counters that remove documents or files, by prefix: each is one step of the summary.
STEP_PREFIXES = (examples_props.FILES_SKIPPED, examples_props.DOCUMENTS_SKIPPED)
# Mixture sampling: documents the weights left out or packed more than once (mixture.py).
SAMPLING_COUNTERS = (examples_props.DOCUMENTS_SAMPLED_OUT, examples_props.DOCUMENTS_REPEATED)
# Where a decontamination stage records what it checked (any property named so is shown).
DECONTAMINATION_PREFIXES = ("decontaminat", "contaminat", examples_props.EVAL_SET_COUNTER)
# The data stage's cleaning settings (JSON strings on the Examples), shown beside the counts.
CLEANING_SETTINGS = (examples_props.DEDUP, examples_props.NEAR_DEDUP, examples_props.QUALITY_FILTERS, examples_props.QUALITY_FILTERS_BY_SOURCE)
TOTALS = (examples_props.FILES_LISTED, examples_props.FILES_READ, examples_props.BYTES_READ, examples_props.DOCUMENTS_PACKED, examples_props.BYTES_PACKED,
          examples_props.TOKENS_REAL, examples_props.SEQUENCES_TRAIN, examples_props.SEQUENCES_EVAL)


def find_pushed(lin: Lineage, target: str):
    """The PushedModel (or Model) TARGET names: a pushed version number (the newest push of it),
    a pushed model directory, an artifact id or URI."""
    local = not is_remote(target) and fs.exists(target)
    if not local:
        pushes = [a for a in lin.store.get_artifacts_by_type("PushedModel")
                  if properties(a).get(push_props.PUSHED) == 1
                  and str(properties(a).get(push_props.PUSHED_VERSION)) == target]
        if pushes:
            return max(pushes, key=lambda a: a.id)
    return lin.find_artifact(target)


def _single_input(lin: Lineage, artifact_id: int, key: str) -> int | None:
    producer = lin.producer(artifact_id)
    ids = lin.inputs(producer).get(key, []) if producer else []
    return ids[0] if ids else None


def summary(lin: Lineage, target: str) -> dict:
    """The training-content summary of the model TARGET names (find_pushed)."""
    artifact = find_pushed(lin, target)
    kind = lin.artifact_type(artifact)
    push = properties(artifact) if kind == "PushedModel" else {}
    model_id = _single_input(lin, artifact.id, "model") if kind == "PushedModel" else artifact.id
    if kind not in ("PushedModel", "Model") or model_id is None:
        raise NotFoundError(f"{target!r} is a {kind}, not a pushed model or a Model")
    trainer = lin.producer(model_id)
    examples_id = _single_input(lin, model_id, "examples")
    if examples_id is None:
        raise NotFoundError(f"Model #{model_id} has no Examples input recorded in this store")
    examples = properties(lin.artifact(examples_id))
    result = {"target": target, "pushed_version": push.get(push_props.PUSHED_VERSION),
              "destination": push.get(push_props.PUSHED_DESTINATION), "model_id": model_id,
              "run_id": (lin.runs_of_execution(trainer) or [None])[0] if trainer else None,
              "fine_tuned_from": _single_input(lin, model_id, "base_model"),
              "examples_id": examples_id, "examples_uri": lin.artifact(examples_id).uri,
              "input_listing": examples.get(examples_props.INPUT_LISTING)}
    result.update(data_content(examples, _data_settings(lin, examples_id)))
    result["tokenizer"] = tokenizer_of(lin, model_id, examples)
    return result


def _data_settings(lin: Lineage, examples_id: int) -> dict:
    producer = lin.producer(examples_id)
    raw = properties(lin.execution(producer)).get("data_config") if producer else None
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return {}


def data_content(examples: dict, settings: dict) -> dict:
    """Sources, formats, totals, the removal steps with their counts and the decontamination
    record, from the Examples' properties (and the data section it was made with)."""
    try:
        sources = json.loads(examples.get(examples_props.SOURCES) or "[]")
    except ValueError:
        sources = []
    if not sources:  # made before mixtures: one source from the data-level properties
        sources = [{"name": "default", "input": examples.get(examples_props.INPUT),
                    "root": examples.get(examples_props.INPUT_ROOT), "format": examples.get(examples_props.FORMAT),
                    "document": examples.get(examples_props.DOCUMENT), "files": examples.get(examples_props.FILES_LISTED),
                    "bytes_listed": examples.get(examples_props.BYTES_READ), "weight": 1.0}]
    steps = [{"step": name, "count": value, "dedup": settings.get("dedup")
              if name == "documents_skipped_duplicate" else None}
             for name, value in sorted(examples.items())
             if name.startswith(STEP_PREFIXES) or name in SAMPLING_COUNTERS]
    decontamination = {}
    for name, value in sorted(examples.items()):
        if name.startswith(DECONTAMINATION_PREFIXES):
            try:
                decontamination[name] = json.loads(value) if isinstance(value, str) else value
            except ValueError:
                decontamination[name] = value
    cleaning = {}
    for name in CLEANING_SETTINGS:
        # A JSON string on the Examples, or already parsed in the data section (data_config).
        value = examples.get(name, settings.get(name))
        if value is not None:
            try:
                parse = isinstance(value, str) and name != "dedup"
                cleaning[name] = json.loads(value) if parse else value
            except ValueError:
                cleaning[name] = value
    return {"sources": sources, "formats": sorted({str(s.get("format")) for s in sources}),
            "cleaning": cleaning,
            "totals": {name: examples.get(name) for name in TOTALS},
            "dedup": settings.get("dedup"), "steps": steps, "decontamination": decontamination}


def tokenizer_of(lin: Lineage, model_id: int, examples: dict) -> dict:
    """The tokenizer the Examples were encoded with (their properties), else the Trainer's
    Tokenizer input, else the data section's setting (bytes)."""
    if examples.get(examples_props.TOKENIZER_KIND):
        return {"kind": examples[examples_props.TOKENIZER_KIND], "vocab_size": examples.get(examples_props.VOCAB_SIZE)}
    tokenizer_id = _single_input(lin, model_id, "tokenizer")
    if tokenizer_id is not None:
        props = properties(lin.artifact(tokenizer_id))
        return {"kind": props.get(tokenizer_props.KIND), "vocab_size": props.get(tokenizer_props.VOCAB_SIZE),
                "model_type": props.get(tokenizer_props.MODEL_TYPE)}
    return {"kind": examples.get(examples_props.TOKENIZER, "bytes"), "vocab_size": None}


# ----------------------------------------------------------------------------------------------
# trace --down FILE


def _could_hold(examples: dict, path: str) -> bool:
    """Whether the file can be in this Examples' listing at all (under one of its sources'
    roots), so only those listings are read."""
    try:
        roots = [s.get("root") for s in json.loads(examples.get(examples_props.SOURCES) or "[]")]
    except ValueError:
        roots = []
    roots = [r for r in roots if r] or [examples.get(examples_props.INPUT_ROOT) or ""]
    if is_remote(path):
        return any(path.startswith(r.rstrip("/") + "/") for r in roots)
    return any(fs.absolute(path).startswith(fs.absolute(r) + os.sep)
               for r in roots if r and not is_remote(r))


def examples_with_file(lin: Lineage, path: str) -> list[dict]:
    """Every Examples artifact whose recorded input listing holds the file, with its source."""
    found = []
    for artifact in lin.store.get_artifacts_by_type("Examples"):
        props = properties(artifact)
        listing = props.get(examples_props.INPUT_LISTING)
        if not listing or not _could_hold(props, path):
            continue
        try:
            text = fs.read_text(listing)
        except (OSError, FileNotFoundError):
            continue  # the artifact's files were removed: nothing to answer from
        for record in read_listing(text):
            if same_file(record["path"], path):
                found.append({"artifact_id": artifact.id, "uri": artifact.uri,
                              "source": record.get("source"), "size": record.get("size"),
                              "mtime": record.get("mtime")})
                break
    return found


def pushed_below(lin: Lineage, artifact_id: int) -> list[dict]:
    """Every pushed version made (at any depth: Trainer, warm-started children, Pusher) from
    the artifact, oldest push first."""
    seen, frontier, found = set(), [artifact_id], []
    while frontier:
        current = frontier.pop()
        if current in seen:
            continue
        seen.add(current)
        artifact = lin.artifact(current)
        props = properties(artifact)
        if lin.artifact_type(artifact) == "PushedModel" and props.get(push_props.PUSHED) == 1:
            producer = lin.producer(current)
            found.append({"pushed_version": props.get(push_props.PUSHED_VERSION),
                          "destination": props.get(push_props.PUSHED_DESTINATION),
                          "pushed_model_id": current,
                          "model_id": _single_input(lin, current, "model"),
                          "run_id": (lin.runs_of_execution(producer) or [None])[0]
                          if producer else None})
        for execution in lin.consumers(current):
            for ids in lin.outputs(execution).values():
                frontier += [i for i in ids if i not in seen]
    return sorted(found, key=lambda f: f["pushed_model_id"])


def trace_file_down(lin: Lineage, target: str) -> dict:
    """Which pushed versions were trained on the input file TARGET (a path or URI)."""
    path = target if is_remote(target) else fs.absolute(target)
    examples = examples_with_file(lin, path)
    if not examples:
        raise NotFoundError(f"{target!r} is not an artifact, and no recorded input listing holds "
                            "it (the data stage records its listing since mixtures were added)")
    pushed: dict[int, dict] = {}
    for found in examples:
        found["pushed"] = pushed_below(lin, found["artifact_id"])
        pushed.update({p["pushed_model_id"]: p for p in found["pushed"]})
    return {"target": target, "direction": "down", "input_file": path, "examples": examples,
            "pushed_versions": [pushed[k] for k in sorted(pushed)]}


def trace_down(lin: Lineage, target: str, page: int | None = None) -> dict:
    """`trace --down`: from an artifact (queries.trace, plus the pushed versions below it) or,
    when TARGET is no artifact, from an input file (trace_file_down). `page`: queries.trace's."""
    from pipeline.lineage import queries
    try:
        start = lin.find_artifact(target)
    except NotFoundError:
        return trace_file_down(lin, target)
    result = queries.trace(lin, str(start.id), down=True, page=page)
    result["target"] = target
    result["pushed_versions"] = pushed_below(lin, start.id)
    return result
