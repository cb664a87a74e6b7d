"""Lineage questions the browser asks besides `bigtrain lineage`'s (queries.py): the graph around
one artifact, one step downstream, and what a run pushed. Plain data, like queries.py."""

from __future__ import annotations

from pipeline.lineage.queries import _execution_record, _fine_tuning
from pipeline.lineage.store import Lineage, properties


def neighborhood(lin: Lineage, artifact_id: int, depth: int = 3, fan_out: int = 8) -> dict:
    """The lineage graph around one artifact, `depth` hops up (producers and their inputs) and
    down (consumers and their outputs), at most `fan_out` executions per artifact each way (the
    newest; a history of cached runs re-reads one artifact thousands of times). Nodes and edges
    as in graph(); each node says its depth from the artifact (negative: upstream)."""
    nodes, edges, seen_edges = {}, [], set()

    def add_artifact(i, level):
        key = f"a{i}"
        if key not in nodes:
            artifact = lin.artifact(i)
            nodes[key] = {"id": key, "kind": "artifact", "artifact_id": i, "depth": level,
                          "label": f"{lin.artifact_type(artifact)} #{i}"}
        return key

    def add_execution(e, level):
        key = f"e{e}"
        if key not in nodes:
            execution = lin.execution(e)
            nodes[key] = {"id": key, "kind": "execution", "execution_id": e, "depth": level,
                          "state": lin.state(execution), "runs": lin.runs_of_execution(e),
                          "label": f"{lin.node_of.get(e, execution.name)} ({lin.state(execution)})"}
        return key

    def edge(a, b, label):
        if (a, b) not in seen_edges:
            seen_edges.add((a, b))
            edges.append({"from": a, "to": b, "label": label})

    add_artifact(artifact_id, 0)
    for direction in (-1, 1):
        frontier, hidden = [artifact_id], 0
        for level in range(1, depth + 1):
            following = []
            for current in frontier:
                if direction < 0:
                    producer = lin.producer(current)
                    executions = [producer] if producer else []
                else:
                    consumers = lin.consumers(current)
                    executions, hidden = consumers[-fan_out:], hidden + max(0, len(consumers) - fan_out)
                for e in executions:
                    ekey = add_execution(e, direction * (2 * level - 1))
                    links = lin.inputs(e) if direction < 0 else lin.outputs(e)
                    for name, ids in links.items():
                        for i in ids:
                            akey = add_artifact(i, direction * 2 * level)
                            if direction < 0:
                                edge(akey, ekey, name)
                            else:
                                edge(ekey, akey, name)
                            following.append(i)
                    if direction < 0:
                        edge(ekey, f"a{current}", "output")
                    else:
                        edge(f"a{current}", ekey, "input")
            frontier = following
        if direction > 0:
            more_down = hidden
    return {"artifact_id": artifact_id, "nodes": list(nodes.values()), "edges": edges,
            "consumers_not_shown": more_down}


def execution_record(lin: Lineage, execution_id: int) -> dict:
    """An execution: id, node, state and the runs it belongs to."""
    return _execution_record(lin, execution_id)


def trace_step_down(lin: Lineage, artifact_id: int, limit: int = 20) -> dict:
    """One step of `trace --down`: the newest `limit` executions that read the artifact, each
    with its outputs, and the fine-tuned children when it is a Model."""
    consumers = lin.consumers(artifact_id)
    rec = {"used_by": [dict(_execution_record(lin, e), outputs=lin.outputs(e))
                       for e in consumers[-limit:]],
           "not_shown": max(0, len(consumers) - limit)}
    if lin.artifact_type(lin.artifact(artifact_id)) == "Model":
        _fine_tuning(lin, artifact_id, rec, down=True)
    return rec


def pushed_model(lin: Lineage, ref: str) -> dict:
    """What run `ref` pushed: version, destination, the PushedModel, Model, blessing and
    evaluation (with its variants' figures), read from the run's own executions."""
    run = lin.run(ref)
    found = {"run_id": run.name}
    for execution in lin.executions_of(run):
        if lin.node_of.get(execution.id, "").endswith(("resolver", "importer")):
            continue
        for ids in lin.outputs(execution.id).values():
            for artifact_id in ids:
                artifact = lin.artifact(artifact_id)
                kind = lin.artifact_type(artifact)
                if kind in ("PushedModel", "Model", "ModelBlessing", "ModelEvaluation"):
                    found[kind] = dict(properties(artifact), id=artifact_id, uri=artifact.uri)
    pushed = found.get("PushedModel", {})
    found["version"] = pushed.get("pushed_version") if pushed.get("pushed") == 1 else None
    found["destination"] = pushed.get("pushed_destination")
    return found
