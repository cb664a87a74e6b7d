"""Lineage questions the browser asks besides `bigtrain lineage`'s (queries.py): the graph around
one artifact, one step downstream, and what a run pushed. Plain data, like queries.py."""

from __future__ import annotations

from components.push import properties as push_props
from pipeline.lineage.queries import execution_record, fine_tuning, paged
from pipeline.lineage.store import Lineage, properties


class _Graph:
    """Nodes and edges of a lineage graph as graph() returns them, each node added once."""

    def __init__(self, lin: Lineage):
        self.lin, self.nodes, self.edges, self._seen = lin, {}, [], set()

    def artifact(self, i: int, level: int) -> str:
        key = f"a{i}"
        if key not in self.nodes:
            artifact = self.lin.artifact(i)
            self.nodes[key] = {"id": key, "kind": "artifact", "artifact_id": i, "depth": level,
                               "label": f"{self.lin.artifact_type(artifact)} #{i}"}
        return key

    def execution(self, e: int, level: int) -> str:
        key = f"e{e}"
        if key not in self.nodes:
            execution, lin = self.lin.execution(e), self.lin
            self.nodes[key] = {"id": key, "kind": "execution", "execution_id": e, "depth": level,
                               "state": lin.state(execution),
                               "label": f"{lin.node_of.get(e, execution.name)} ({lin.state(execution)})"}
        return key

    def edge(self, a: str, b: str, label: str) -> None:
        if (a, b) not in self._seen:
            self._seen.add((a, b))
            self.edges.append({"from": a, "to": b, "label": label})

    def walk(self, artifact_id: int, direction: int, depth: int, fan_out: int) -> int:
        """Add `depth` hops up (direction -1: producers and their inputs) or down (+1: the newest
        `fan_out` consumers and their outputs); returns how many consumers were not shown."""
        frontier, hidden = [artifact_id], 0
        for level in range(1, depth + 1):
            following = []
            for current in frontier:
                if direction < 0:
                    executions = [p for p in [self.lin.producer(current)] if p]
                else:
                    consumers = self.lin.consumers(current)
                    executions, hidden = consumers[-fan_out:], hidden + max(0, len(consumers) - fan_out)
                for e in executions:
                    following += self._link(e, current, direction, level)
            frontier = following
        return hidden

    def _link(self, e: int, current: int, direction: int, level: int) -> list[int]:
        ekey = self.execution(e, direction * (2 * level - 1))
        links = self.lin.inputs(e) if direction < 0 else self.lin.outputs(e)
        reached = []
        for name, ids in links.items():
            for i in ids:
                akey = self.artifact(i, direction * 2 * level)
                self.edge(*((akey, ekey) if direction < 0 else (ekey, akey)), name)
                reached.append(i)
        if direction < 0:
            self.edge(ekey, f"a{current}", "output")
        else:
            self.edge(f"a{current}", ekey, "input")
        return reached


def neighborhood(lin: Lineage, artifact_id: int, depth: int = 3, fan_out: int = 8) -> dict:
    """The lineage graph around one artifact, `depth` hops up (producers and their inputs) and
    down (consumers and their outputs), at most `fan_out` executions per artifact each way (the
    newest; a history of cached runs re-reads one artifact thousands of times). Nodes and edges
    as in graph(); each node says its depth from the artifact (negative: upstream)."""
    graph = _Graph(lin)
    graph.artifact(artifact_id, 0)
    graph.walk(artifact_id, -1, depth, fan_out)
    more_down = graph.walk(artifact_id, 1, depth, fan_out)
    return {"artifact_id": artifact_id, "nodes": list(graph.nodes.values()), "edges": graph.edges,
            "consumers_not_shown": more_down}


def trace_step_down(lin: Lineage, artifact_id: int, limit: int = 20, page: int | None = None
                    ) -> dict:
    """One step of `trace --down`: the newest `limit` executions that read the artifact and ran,
    each with its outputs; the cached ones that re-used outputs counted (first and last few
    named); the fine-tuned children when it is a Model. `page` N: the Nth page of both lists
    (queries.paged) instead."""
    ran, cached = lin.readers(artifact_id)
    if page is None:
        shown, used = ran[-limit:], None
    else:
        used = paged(lin, ran, page)
        shown = [e["execution_id"] for e in used["executions"]]
    rec = {"used_by": [dict(execution_record(lin, e), outputs=lin.outputs(e)) for e in shown],
           "not_shown": 0 if page else max(0, len(ran) - limit),
           "used_by_page": used and {k: used[k] for k in ("count", "page", "pages", "per_page")},
           "cached_readers": paged(lin, cached, page)}
    if lin.artifact_type(lin.artifact(artifact_id)) == "Model":
        fine_tuning(lin, artifact_id, rec, down=True)
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
    found["version"] = pushed.get(push_props.PUSHED_VERSION) if pushed.get(push_props.PUSHED) == 1 else None
    found["destination"] = pushed.get(push_props.PUSHED_DESTINATION)
    return found
