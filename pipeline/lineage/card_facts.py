"""The lineage facts of a model card (components/serving/hf/card.py): for one run, where its data
came from and how much of it, how it was trained, how it measured, what was pushed, read from
the run's own executions and their outputs in MLMD."""

from __future__ import annotations

from components.push import properties as push_props
from components.text_example_gen import properties as examples_props
from components.common.errors import NotFoundError
from components.serving.data_facts import data_facts
from components.serving.hf.card import EVAL_FIGURES
from pipeline.lineage.standing import document_standing
from pipeline.lineage.store import Lineage, properties


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
             "training": {}, "evaluation": {}, "pushed_version": None, "input_fingerprint": None}
    for node, kind, artifact, props in _outputs(lin, run):
        if kind == "Examples" and examples_props.INPUT in props:
            data = data_facts(props)
            facts["data_sources"] += data["data_sources"]
            facts["data_counts"].update(data["data_counts"])
            facts["input_fingerprint"] = data["input_fingerprint"]
        elif kind == "Model":
            facts["model_uri"] = artifact.uri
            facts["evaluation"].update({k: props[k] for k in EVAL_FIGURES if k in props})
            facts["training"].update({k: v for k, v in sorted(props.items())
                                      if k not in EVAL_FIGURES and not isinstance(v, dict)})
        elif kind == "ModelEvaluation":
            facts["evaluation"].update({f"evaluator_{k}": v for k, v in props.items()
                                        if isinstance(v, (int, float))})
            facts["standing"] = [line.strip() for line in document_standing(props)]
        elif kind == "PushedModel" and props.get(push_props.PUSHED) == 1:
            facts["pushed_version"] = props.get(push_props.PUSHED_VERSION)
    return facts


def model_facts(lin: Lineage, *, model_id=None, model_uri: str | None = None) -> dict:
    """Card facts of the run whose Trainer made a Model artifact, found by its MLMD id (a push
    record's model_id; its URI must then be model_uri, so a record from another store is not
    taken for this one's) or by its URI (a model folder); {} when this store does not hold it."""
    model = None
    if model_id is not None:
        try:
            model = lin.artifact(int(model_id))
        except (NotFoundError, ValueError, TypeError):
            return {}
        if model_uri and model.uri.rstrip("/") != model_uri.rstrip("/"):
            return {}
    elif model_uri:
        found = [a for a in lin.store.get_artifacts_by_uri(model_uri.rstrip("/"))
                 if lin.artifact_type(a) == "Model"]
        model = min(found, key=lambda a: a.id) if found else None
    producer = lin.producer(model.id) if model is not None and lin.artifact_type(model) == "Model" else None
    runs = lin.runs_of_execution(producer) if producer is not None else []
    if not runs:
        return {}
    facts = card_facts(lin, runs[0])
    facts.pop("model_uri")
    return facts
