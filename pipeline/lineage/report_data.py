"""The data stage's lines of the run report (pipeline/lineage/report.py): its cleaning steps with
their counts (dedup, each quality filter, decontamination per evaluation set) and, per source of
a mixture, what each put into the splits. Read from the Examples artifact's properties."""

from __future__ import annotations

import json

from components.config import DEFAULT_SOURCE, QUALITY_FILTERS
from components.corpus.screen import EVAL_SET_COUNTER
from components.text_example_gen import properties as examples_props


def _json(examples: dict, name: str, default):
    try:
        return json.loads(examples.get(name) or "null") or default
    except ValueError:
        return default


def filter_lines(examples: dict) -> list[str]:
    """One line per quality filter any source met (the data-level ones and each source's own,
    QUALITY_FILTERS order): the documents it skipped, and with a mixture the sources it
    screened. Artifacts older than per-source filters: the data-level list alone."""
    by_source = _json(examples, "quality_filters_by_source", {})
    if not by_source:
        by_source = {DEFAULT_SOURCE: _json(examples, "quality_filters", [])}
    names = [n for n in QUALITY_FILTERS if any(n in f for f in by_source.values())]
    names += sorted({n for f in by_source.values() for n in f} - set(names))
    lines = []
    for name in names:
        sources = [source for source, listed in by_source.items() if name in listed]
        where = "" if list(by_source) == [DEFAULT_SOURCE] else f" (sources: {', '.join(sources)})"
        count = examples.get(f"documents_skipped_filter_{name}", 0)
        lines.append(f"  {'filter ' + name:<26} {count} skipped{where}")
    return lines


def cleaning_lines(examples: dict) -> list[str]:
    """The data stage's cleaning steps with their counts: dedup mode (and the near-dedup
    parameters), each quality filter (filter_lines), each evaluation set checked for
    contamination, and the evaluation texts too short to check."""
    lines = []
    if examples.get(examples_props.DEDUP):
        lines.append(f"  {'dedup':<26} {examples[examples_props.DEDUP]}" + (
            f" {examples[examples_props.NEAR_DEDUP]}" if examples.get(examples_props.NEAR_DEDUP) else ""))
    lines += filter_lines(examples)
    eval_sets = _json(examples, "decontamination_eval_sets", [])
    for i, entry in enumerate(eval_sets):
        count = examples.get(f"{EVAL_SET_COUNTER}{i}", 0)
        lines.append(f"  {'contaminated by eval set':<26} {count} ({entry['name']}, "
                     f"{len(entry['files'])} files)")
    settings = _json(examples, "decontamination", {})
    if eval_sets and "eval_texts_too_short" in settings:
        per_set = ", ".join(f"{e['name']}: {e.get('too_short', 0)} of {e.get('texts', 0)}"
                            for e in eval_sets)
        lines.append(f"  {'eval texts too short to check':<26} {settings['eval_texts_too_short']}"
                     f" (< {settings.get('min_words')} words; {per_set})")
    return lines


def sources_section(examples: dict) -> list[str]:
    """Per source of the data stage (its `sources` property): weight (or, in a share mixture, the
    share asked for), realized epochs, realized share of the train tokens, and the documents, bytes and tokens it put into each split (every
    copy counted)."""
    try:
        sources = json.loads(examples.get(examples_props.SOURCES) or "[]")
    except ValueError:
        return []
    rows = [s for s in sources if isinstance(s.get("documents"), dict)]
    if not rows:
        return []
    # A share mixture (share_asked): the asked share beside the realized one, not the weight.
    asked = any(isinstance(s.get("share_asked"), (int, float)) for s in rows)
    lines = ["  sources (train / eval; copies counted; "
             + ("asked = the share of the train tokens asked for" if asked else
                "weight = epochs asked for")
             + ", share = the source's part of the train tokens):",
             f"    {'source':<12} {'asked' if asked else 'weight':>6} {'epochs':>7} {'share':>7} "
             f"{'documents':>17} {'bytes':>23} {'tokens':>23}"]
    for s in rows:
        pair = lambda m: f"{s[m]['train']} / {s[m]['eval']}"
        share = f"{s['share']:.1%}" if isinstance(s.get("share"), (int, float)) else "-"
        wanted = f"{s['share_asked']:.1%}" if asked else f"{s['weight']:g}"
        lines.append(f"    {s['name']:<12} {wanted:>6} {s['epochs']:>7.3f} {share:>7} "
                     f"{pair('documents'):>17} {pair('bytes'):>23} {pair('tokens'):>23}")
    return lines


def placement_of(recorded) -> list[str]:
    """The run's BEAM_PLACEMENT lines (pipeline/lineage/record.py), [] when none was recorded."""
    lines = json.loads(recorded) if recorded else []
    if not isinstance(lines, list):
        raise ValueError(f"bigtrain_beam_placement holds {recorded!r}, not a JSON list of lines")
    return [str(line) for line in lines]


def placement_section(lines: list[str], states: dict[str, str]) -> list[str]:
    """Where each Beam stage ran and why, recorded by `bigtrain run` when its runner is not the
    DirectRunner (pipeline.beam_stage_lines); a stage served from the cache ran nowhere."""
    if not lines:
        return []
    out = ["where the Beam stages ran (runtime.beam_args, runtime.beam_direct_stages):"]
    for line in lines:
        state = states.get(line.split(":", 1)[0])
        out.append(f"  {line}" + (f" [{state}: did not run]" if state == "cached" else ""))
    return out
