"""The lineage facts of a model card (components/serving/hf/card.py): for one run, where its data
came from and how much of it, how it was trained, how it measured, what was pushed, read from
the run's own executions and their outputs in MLMD."""

from __future__ import annotations

from components.serving.hf.card import EVAL_FIGURES
from pipeline.lineage.store import Lineage, properties

SOURCE_KEYS = ("input", "format", "document", "input_fingerprint", "files_listed")


def _outputs(lin: Lineage, run) -> list[tuple[str, str, object, dict]]:
    """(node, artifact type, artifact, properties) of every output of the run's own executions
    (resolvers and importers re-emit artifacts of other runs: left out)."""
    found = []
    for execution in lin.executions_of(run):
        node = lin.node_of.get(execution.id, "")
        if node.endswith(("resolver", "importer")):
            continue
        for ids in lin.outputs(execution.id).values():
            for artifact_id in ids:
                artifact = lin.artifact(artifact_id)
                found.append((node, lin.artifact_type(artifact), artifact, properties(artifact)))
    return found


def card_facts(lin: Lineage, ref: str) -> dict:
    """Card facts of run `ref` plus "model_uri": the Model artifact its Trainer wrote (None when
    the run trained none, e.g. a cached Trainer: its model belongs to an earlier run)."""
    run = lin.run(ref)
    facts = {"run_id": run.name, "model_uri": None, "data_sources": [], "data_counts": {},
             "training": {}, "evaluation": {}, "pushed_version": None}
    for node, kind, artifact, props in _outputs(lin, run):
        if kind == "Examples" and "input" in props:
            facts["data_sources"].append({k: props[k] for k in SOURCE_KEYS if k in props})
            facts["data_counts"].update({k: v for k, v in sorted(props.items())
                                         if isinstance(v, int) and k not in SOURCE_KEYS})
        elif kind == "Model":
            facts["model_uri"] = artifact.uri
            facts["evaluation"].update({k: props[k] for k in EVAL_FIGURES if k in props})
            facts["training"].update({k: v for k, v in sorted(props.items())
                                      if k not in EVAL_FIGURES and not isinstance(v, dict)})
        elif kind == "ModelEvaluation":
            facts["evaluation"].update({f"evaluator_{k}": v for k, v in props.items()
                                        if isinstance(v, (int, float))})
        elif kind == "PushedModel" and props.get("pushed") == 1:
            facts["pushed_version"] = props.get("pushed_version")
    return facts
