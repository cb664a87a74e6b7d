"""Human output for the lineage queries: aligned tables, the trace chain, and the run graph as
Graphviz DOT, Mermaid, SVG and PNG (laid out here: no Graphviz binary needed)."""

from __future__ import annotations

import datetime
import html
import json


def table(rows: list[list], header: list[str]) -> str:
    cells = [[str("" if c is None else c) for c in row] for row in [header] + rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _when(ms: float) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def runs_text(runs: list[dict]) -> str:
    short = {"complete": "ok", "cached": "cached", "failed": "FAILED", "abandoned": "ABANDONED",
             "preempted": "PREEMPTED"}
    rows = [[r["run_id"], _when(r["start_ms"]), f"{r['duration_s']:.1f}s", r["state"],
             r["pushed_version"] or "-",
             " ".join(f"{n}:{short.get(s, s)}" for n, s in r["stages"].items())] for r in runs]
    headers = ["run", "start", "duration", "state", "pushed", "stages"]
    if any(r.get("trackers") for r in runs):   # config tracking.backends: the tracker run ids
        headers.append("trackers")
        for row, r in zip(rows, runs):
            row.append(trackers_text(r.get("trackers") or {}))
    return table(rows, headers)


def trackers_text(trackers: dict) -> str:
    """'mlflow:<id> wandb:<id>' (a run's tracker runs), '-' without any."""
    return " ".join(f"{name}:{run_id}" for name, run_id in sorted(trackers.items())) or "-"


def _props(props: dict) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in props.items())


def trace_text(result: dict) -> str:
    lines = [f"trace {result['direction']}stream from {result['target']}"]
    if result.get("trackers"):
        lines.append(f"made in run {result['trackers']['run']}, tracker runs: "
                     f"{trackers_text(result['trackers']['ids'])}")
    arrow = "used by" if result["direction"] == "down" else "<-"
    for step in result["steps"]:
        pad = "  " * step["depth"]
        lines.append(f"{pad}{step['type']} #{step['artifact_id']}  {step['uri']}")
        if step["properties"]:
            lines.append(f"{pad}    {_props(step['properties'])}")
        if "evaluation" in step:
            ev = step["evaluation"]
            lines.append(f"{pad}    evaluation #{ev['artifact_id']}: {_props(ev['properties'])}")
        for anomalies in step.get("anomalies", []):
            lines.append(f"{pad}    validated: {anomalies['type']} #{anomalies['artifact_id']}: "
                         f"anomalies {anomalies['properties']['anomalies_found']}")
        if "raw_input" in step:
            raw = step["raw_input"]
            lines.append(f"{pad}    raw input: {raw['input']} (root {raw['root']}, {raw['files']} files, "
                         f"content sha256 {raw['fingerprint']})")
        if "fine_tuned_from" in step:
            lines.append(f"{pad}    fine-tuned from Model #{step['fine_tuned_from']}")
        if step.get("fine_tuned_children"):
            lines.append(f"{pad}    fine-tuned children: "
                         + ", ".join(f"Model #{c}" for c in step["fine_tuned_children"]))
        made = step.get("made_by")
        if made:
            lines.append(f"{pad}  <- {made['node']} (execution {made['execution_id']}, {made['state']})")
            if made.get("reused_by", {}).get("count"):
                lines.append(f"{pad}     {reuse_text(made, made['reused_by'])}")
        for use in step.get("used_by", []):
            lines.append(f"{pad}  {arrow} {use['node']} (execution {use['execution_id']}, {use['state']})")
        if step.get("used_by_page"):
            lines.append(f"{pad}  ({step['used_by_page']['count']} readers that ran: "
                         f"{_page_text(step['used_by_page'])})")
        if step.get("used_by_not_shown"):
            lines.append(f"{pad}  ... and {step['used_by_not_shown']} more readers between those")
        if step.get("cached_readers", {}).get("count"):
            lines.append(f"{pad}  {arrow} {cached_readers_text(step['cached_readers'])}")
    if result["direction"] == "down":
        lines.append(f"models trained on it: {', '.join(f'#{m}' for m in result['models']) or 'none'}")
    if "pushed_versions" in result:
        lines.append("pushed versions made from it: " + (", ".join(
            f"{p['pushed_version']} ({p['destination']})" for p in result["pushed_versions"])
            or "none"))
    return "\n".join(lines)


def _runs_list(listed: dict) -> str:
    """'run (execution N)' for the first and last few of listed["count"] executions, '...'
    between; or for one page of them (queries.paged), saying which."""
    named = [f"{_names(e['runs'])} (execution {e['execution_id']})" for e in listed["executions"]]
    if "page" in listed:
        return f"{_page_text(listed)}: {', '.join(named) or 'none on this page'}"
    if listed["count"] > len(named):
        half = len(named) // 2
        named = named[:half] + ["..."] + named[half:]
    return ", ".join(named)


def _page_text(listed: dict) -> str:
    return f"page {listed['page']} of {listed['pages']}, {listed['per_page']} a page"


def _names(items: list[str]) -> str:
    return ", ".join(items) or "?"


def reuse_text(made: dict, reuse: dict) -> str:
    """'produced by execution N, reused by K cached runs: first and last few' (one line)."""
    return (f"produced by execution {made['execution_id']}, reused by {reuse['count']} cached "
            f"run{'s' if reuse['count'] != 1 else ''}: "
            f"{_runs_list(reuse)}")


def cached_readers_text(cached: dict) -> str:
    return (f"{cached['count']} cached execution{'s' if cached['count'] != 1 else ''} (re-used "
            f"outputs, nothing ran): {_runs_list(cached)}")


def diff_text(result: dict) -> str:
    a, b = result["a"], result["b"]
    out = [f"diff A={a}  B={b}", "", "stages:",
           table([[s["node"], s["a"] or "-", s["b"] or "-"] for s in result["stages"]],
                 ["stage", "A", "B"]), "", "input data:"]
    out.append(table([[i["name"], i["a"], i["b"]] for i in result["inputs"]], ["", "A", "B"]))
    out.append(f"data changed: {'yes' if result['data_changed'] else 'no'}; model/training code "
               f"changed: {'yes' if result['code_changed'] else 'no'}")
    out += ["", "config and parameters that differ:"]
    out.append(table([[c["node"], c["key"], c["a"], c["b"]] for c in result["config"]],
                     ["stage", "key", "A", "B"]) if result["config"] else "  (none)")
    out += ["", "metrics:"]
    fmt = lambda v: f"{v:.4f}" if isinstance(v, float) else ("-" if v is None else str(v))
    out.append(table([[m["name"], fmt(m["a"]), fmt(m["b"])] for m in result["metrics"]], ["", "A", "B"]))
    return "\n".join(out)


def why_text(result: dict) -> str:
    if not result["failed"]:
        return f"run {result['run_id']} has no failed stage"
    states = {f.get("state") for f in result["failed"]}
    word = ("failed" if "failed" in states else "was abandoned" if "abandoned" in states
            else "was preempted (the next run resumes it)")
    out = [f"run {result['run_id']} {word}"]
    for f in result["failed"]:
        out += [f"  stage:  {f['node']} (execution {f['execution_id']})",
                f"  error:  {f['error_type'] + ': ' if f['error_type'] else ''}{f['error']}",
                f"  log:    {f['log']}", "  inputs:"]
        out += [f"    {i['type']} #{i['artifact_id']}  {i['uri']}" for i in f["inputs"]] or ["    (none)"]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# The run graph.

STATE_COLORS = {"complete": "#c8e6c9", "cached": "#e0e0e0", "failed": "#ffcdd2", "abandoned": "#ffe0b2",
                "preempted": "#fff9c4"}


def to_dot(g: dict) -> str:
    lines = [f'digraph "{g["run_id"]}" {{', "  rankdir=LR;", '  node [fontname="Helvetica", fontsize=10];']
    for n in g["nodes"]:
        label = n["label"].replace('"', "'")
        if n["kind"] == "execution":
            lines.append(f'  {n["id"]} [label="{label}", shape=box, style=filled, '
                         f'fillcolor="{STATE_COLORS.get(n["state"], "#ffffff")}"];')
        else:
            lines.append(f'  {n["id"]} [label="{label}", shape=ellipse];')
    for e in g["edges"]:
        lines.append(f'  {e["from"]} -> {e["to"]} [label="{e["label"]}", fontsize=8];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_mermaid(g: dict) -> str:
    lines = ["flowchart LR"]
    for n in g["nodes"]:
        label = n["label"].replace('"', "'")
        lines.append(f'  {n["id"]}["{label}"]' if n["kind"] == "execution" else f'  {n["id"]}(["{label}"])')
    for e in g["edges"]:
        lines.append(f'  {e["from"]} -->|{e["label"]}| {e["to"]}')
    for state, color in STATE_COLORS.items():
        ids = [n["id"] for n in g["nodes"] if n.get("state") == state]
        if ids:
            lines.append(f"  classDef {state} fill:{color}")
            lines.append(f"  class {','.join(ids)} {state}")
    return "\n".join(lines) + "\n"


CHAR_W, BOX_H, COL_GAP, ROW_GAP, MARGIN = 7, 34, 60, 18, 20


def layout(g: dict) -> tuple[dict, int, int]:
    """Layered left-to-right layout: a node's column is its longest path from a source."""
    preds: dict[str, list[str]] = {n["id"]: [] for n in g["nodes"]}
    for e in g["edges"]:
        preds[e["to"]].append(e["from"])
    column: dict[str, int] = {}

    def col(node, stack=()):
        if node not in column:
            column[node] = 0 if node in stack else max([col(p, stack + (node,)) + 1 for p in preds[node]], default=0)
        return column[node]

    for n in g["nodes"]:
        col(n["id"])
    widths = {n["id"]: len(n["label"]) * CHAR_W + 24 for n in g["nodes"]}
    columns: dict[int, list[dict]] = {}
    for n in g["nodes"]:
        columns.setdefault(column[n["id"]], []).append(n)
    col_width = {c: max(widths[n["id"]] for n in ns) for c, ns in columns.items()}
    boxes, x = {}, MARGIN
    for c in sorted(columns):
        for row, n in enumerate(columns[c]):
            boxes[n["id"]] = (x, MARGIN + row * (BOX_H + ROW_GAP), widths[n["id"]], BOX_H)
        x += col_width[c] + COL_GAP
    height = max(b[1] + b[3] for b in boxes.values()) + MARGIN
    return boxes, x - COL_GAP + MARGIN, height


def to_svg(g: dict) -> str:
    boxes, width, height = layout(g)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="Helvetica, Arial, sans-serif" font-size="12">',
           '<defs><marker id="arrow" markerWidth="8" markerHeight="8" refX="8" refY="4" '
           'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#555"/></marker></defs>',
           f'<title>{html.escape(g["run_id"])}</title>']
    for e in g["edges"]:
        x1, y1, w1, h1 = boxes[e["from"]]
        x2, y2, _, h2 = boxes[e["to"]]
        out.append(f'<line x1="{x1 + w1}" y1="{y1 + h1 / 2}" x2="{x2}" y2="{y2 + h2 / 2}" '
                   f'stroke="#555" marker-end="url(#arrow)"/>')
    for n in g["nodes"]:
        x, y, w, h = boxes[n["id"]]
        fill = STATE_COLORS.get(n.get("state"), "#e3f2fd")
        radius = 4 if n["kind"] == "execution" else h / 2
        out.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="{radius}" fill="{fill}" stroke="#333"/>')
        out.append(f'<text x="{x + w / 2}" y="{y + h / 2 + 4}" text-anchor="middle">{html.escape(n["label"])}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def to_png(g: dict, path: str) -> None:
    from PIL import Image, ImageDraw, ImageFont
    boxes, width, height = layout(g)
    image = Image.new("RGB", (int(width), int(height)), "white")
    draw = ImageDraw.Draw(image)
    try:
        font = ImageFont.load_default(size=12)
    except TypeError:  # older Pillow
        font = ImageFont.load_default()
    for e in g["edges"]:
        x1, y1, w1, h1 = boxes[e["from"]]
        x2, y2, _, h2 = boxes[e["to"]]
        start, end = (x1 + w1, y1 + h1 / 2), (x2, y2 + h2 / 2)
        draw.line([start, end], fill="#555555", width=1)
        draw.polygon([end, (end[0] - 8, end[1] - 4), (end[0] - 8, end[1] + 4)], fill="#555555")
    for n in g["nodes"]:
        x, y, w, h = boxes[n["id"]]
        fill = STATE_COLORS.get(n.get("state"), "#e3f2fd")
        draw.rounded_rectangle([x, y, x + w, y + h], radius=4 if n["kind"] == "execution" else h // 2,
                               fill=fill, outline="#333333")
        draw.text((x + w / 2, y + h / 2), n["label"], fill="black", font=font, anchor="mm")
    image.save(path, "PNG")


def _date(seconds) -> str:
    if seconds is None:
        return "?"
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%d")


def _per_split(row: dict, measure: str) -> str:
    counts = row.get(measure)
    return f"{counts['train']} / {counts['eval']}" if isinstance(counts, dict) else "-"


def summary_markdown(result: dict) -> str:
    """`lineage summary` as Markdown: model, sources, steps, tokenizer, decontamination."""
    version = result["pushed_version"]
    lines = [f"# Training content of {'pushed version ' + str(version) if version else result['target']}",
             "", f"- model: Model #{result['model_id']}, trained in run `{result['run_id']}`"
             + (f", pushed to `{result['destination']}`" if result["destination"] else ""),
             f"- data: Examples #{result['examples_id']} (`{result['examples_uri']}`), input "
             f"listing `{result['input_listing'] or 'not recorded'}`",
             f"- formats: {', '.join(result['formats'])}",
             f"- tokenizer: {result['tokenizer'].get('kind')}"
             + (f", vocabulary {result['tokenizer']['vocab_size']}"
                if result["tokenizer"].get("vocab_size") else "")]
    if result["fine_tuned_from"]:
        lines.append(f"- fine-tuned from Model #{result['fine_tuned_from']}: its training content "
                     "is part of this model's too (`bigtrain lineage summary` on it)")
    lines += ["", "## Sources", "", "| source | input | format | files | bytes listed | modified "
              "| weight | epochs | documents train / eval | bytes train / eval | tokens train / eval |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in result["sources"]:
        lines.append(f"| {s.get('name')} | `{s.get('input')}` | {s.get('format')} | {s.get('files')} "
                     f"| {s.get('bytes_listed')} | {_date(s.get('first_mtime'))} .. "
                     f"{_date(s.get('last_mtime'))} | {s.get('weight')} | {s.get('epochs', '-')} "
                     f"| {_per_split(s, 'documents')} | {_per_split(s, 'bytes')} "
                     f"| {_per_split(s, 'tokens')} |")
    lines += ["", "## Filters, deduplication and sampling", ""]
    lines += [f"- {k}: {json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v}"
              for k, v in result.get("cleaning", {}).items()]
    lines += ["", "| step | count |", "|---|---|"]
    lines += [f"| {step['step']}" + (f" (data.dedup={step['dedup']})" if step["dedup"] else "")
              + f" | {step['count']} |" for step in result["steps"]]
    lines += ["", "## Totals", ""] + [f"- {k}: {v}" for k, v in result["totals"].items()]
    lines += ["", "## Decontamination", ""]
    lines += ([f"- {k}: {json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v}"
               for k, v in result["decontamination"].items()]
              or ["- no evaluation sets were checked for overlap (nothing recorded)"])
    return "\n".join(lines)


def input_file_text(result: dict) -> str:
    """`trace --down FILE`: the Examples whose listing holds it and the versions pushed from them."""
    lines = [f"input file {result['input_file']}"]
    for found in result["examples"]:
        lines.append(f"  in Examples #{found['artifact_id']} (source {found['source']}): "
                     f"{found['uri']}")
    rows = [[p["pushed_version"], p["destination"], f"Model #{p['model_id']}", p["run_id"]]
            for p in result["pushed_versions"]]
    lines.append("pushed versions trained on it:" if rows else "no pushed version was trained on it")
    return "\n".join(lines + ([table(rows, ["version", "destination", "model", "run"])] if rows else []))
