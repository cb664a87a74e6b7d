"""`bigtrain lineage diff`: two runs side by side, as plain data (the stages' states, the config
keys that changed, the input and code digests, the figures of every model and held-out set)."""

from __future__ import annotations

from components.evaluation import properties as eval_props
from components.evaluation.documents import DOCUMENT_FIGURES
from components.evaluation.held_out_sets import property_name
from components.model import properties as model_props
from components.push import properties as push_props
from components.text_example_gen import properties as examples_props
from components.tokenizer import properties as tokenizer_props
from pipeline.lineage.params import changed_parameters
from pipeline.lineage.standing import set_names
from pipeline.lineage.store import Lineage, properties


def _run_artifacts(lin: Lineage, run) -> dict[str, dict]:
    """node -> {"state", "properties" (execution), "outputs": {type: properties}} for one run."""
    out = {}
    for execution in lin.executions_of(run):
        node = lin.node_of.get(execution.id, str(execution.id))
        outputs = {}
        for ids in lin.outputs(execution.id).values():
            for artifact_id in ids:
                artifact = lin.artifact(artifact_id)
                outputs[lin.artifact_type(artifact)] = dict(properties(artifact), id=artifact_id)
        out[node] = {"state": lin.state(execution), "properties": properties(execution),
                     "outputs": outputs}
    return out


def diff(lin: Lineage, ref_a: str, ref_b: str) -> dict:
    run_a, run_b = lin.run(ref_a), lin.run(ref_b)
    a, b = _run_artifacts(lin, run_a), _run_artifacts(lin, run_b)
    nodes = sorted(set(a) | set(b))
    stages = [{"node": n, "a": a.get(n, {}).get("state"), "b": b.get(n, {}).get("state")} for n in nodes]
    config = [{"node": node, "key": key, "a": before, "b": after}
              for node in nodes if node in a and node in b
              for key, before, after in changed_parameters(a[node]["properties"],
                                                           b[node]["properties"])]

    def output(side, type_name, name):
        for node in side.values():
            if type_name in node["outputs"]:
                return node["outputs"][type_name].get(name)
        return None

    inputs = [{"name": n, "a": output(a, "Examples", n), "b": output(b, "Examples", n)}
              for n in (examples_props.INPUT, examples_props.INPUT_FINGERPRINT, examples_props.FILES_LISTED)]
    code = [{"name": "code_digest", "a": output(a, "Model", "code_digest"),
             "b": output(b, "Model", "code_digest")}]
    metrics = [{"name": f"{t}.{n}", "a": output(a, t, n), "b": output(b, t, n)}
               for t, names in (("ModelEvaluation", (eval_props.LOSS, eval_props.BITS_PER_BYTE, eval_props.PERPLEXITY, eval_props.ACCURACY,
                                                     *DOCUMENT_FIGURES)),
                                ("Model", (model_props.FINAL_LOSS, model_props.EVAL_LOSS, model_props.EVAL_BITS_PER_BYTE,
                                           model_props.TOKENS_PER_SECOND)),
                                ("Tokenizer", (tokenizer_props.KIND, tokenizer_props.VOCAB_SIZE, tokenizer_props.BYTES_PER_TOKEN)),
                                ("ModelBlessing", (eval_props.BLESSED,)),
                                ("PushedModel", (push_props.PUSHED, push_props.PUSHED_VERSION)))
               for n in names]
    sets = sorted({n for side in (a, b) for node in side.values()
                   for n in set_names(node["outputs"].get("ModelEvaluation", {}))})
    metrics += [{"name": f"ModelEvaluation.{key}", "a": output(a, "ModelEvaluation", key),
                 "b": output(b, "ModelEvaluation", key)}
                for name in sets for key in (property_name(name, f) for f in DOCUMENT_FIGURES)]
    return {"a": run_a.name, "b": run_b.name, "stages": stages, "config": config,
            "inputs": inputs, "code": code, "metrics": metrics,
            "data_changed": inputs[1]["a"] != inputs[1]["b"],
            "code_changed": code[0]["a"] != code[0]["b"]}
