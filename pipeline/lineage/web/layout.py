"""Node positions for the UI's graphs, computed by networkx (layered: each node's topological
generation is its column), turned into the boxes and lines an SVG template draws."""

from __future__ import annotations

import networkx as nx

BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 190, 34, 70, 22, 12


def layered(graph: dict) -> dict:
    """graph: {"nodes": [{"id", "label", "kind", ...}], "edges": [{"from", "to", "label"}]} ->
    {"width", "height", "nodes": [node + x, y], "edges": [edge + x1, y1, x2, y2]}."""
    dag = nx.DiGraph()
    dag.add_nodes_from(n["id"] for n in graph["nodes"])
    dag.add_edges_from((e["from"], e["to"]) for e in graph["edges"])
    if not nx.is_directed_acyclic_graph(dag):  # lineage is acyclic; stay readable if not
        dag = nx.DiGraph(nx.bfs_tree(dag, next(iter(dag)))) if dag else dag
    for column, generation in enumerate(nx.topological_generations(dag)):
        for node in generation:
            dag.nodes[node]["column"] = column
    for node in graph["nodes"]:
        dag.nodes[node["id"]].setdefault("column", 0)
    positions = nx.multipartite_layout(dag, subset_key="column", align="vertical", scale=1)
    columns = max((d["column"] for _, d in dag.nodes(data=True)), default=0) + 1
    rows = max((sum(1 for _, d in dag.nodes(data=True) if d["column"] == c) for c in range(columns)),
               default=1)
    width = columns * (BOX_W + GAP_X) + 2 * PAD
    height = max(rows, 1) * (BOX_H + GAP_Y) + 2 * PAD
    ys = [p[1] for p in positions.values()] or [0.0]
    low, span = min(ys), (max(ys) - min(ys)) or 1.0
    placed = {}
    for node in graph["nodes"]:
        x = PAD + dag.nodes[node["id"]]["column"] * (BOX_W + GAP_X)
        y = PAD + (positions[node["id"]][1] - low) / span * (height - 2 * PAD - BOX_H) if rows > 1 \
            else PAD
        placed[node["id"]] = dict(node, x=round(x), y=round(y), w=BOX_W, h=BOX_H)
    edges = []
    for e in graph["edges"]:
        a, b = placed.get(e["from"]), placed.get(e["to"])
        if a and b:
            edges.append(dict(e, x1=a["x"] + BOX_W, y1=a["y"] + BOX_H // 2, x2=b["x"],
                              y2=b["y"] + BOX_H // 2))
    return {"width": width, "height": height, "nodes": list(placed.values()), "edges": edges}
