"""The data facts of an Examples artifact (data_sources, data_counts, input_fingerprint): what
the Trainer records in its model's MODEL_INFO and a model card shows (components/serving/hf/card.py).
Here, not in the card, so the card's wording is not the Trainer's code (its cache key)."""

from __future__ import annotations

import json

from components.text_example_gen import properties as examples_props

# A raw source's row: its settings (the `sources` JSON TextExampleGen records on its Examples)
# and what was packed from it per split; without that JSON (one source, older records) the flat
# properties of the same names.
SOURCE_KEYS = ("name", "input", "format", "document", "weight", "share_asked", "files")
SOURCE_MEASURES = ("documents", "bytes", "tokens")
FLAT_SOURCE_KEYS = (examples_props.INPUT, examples_props.FORMAT, examples_props.DOCUMENT,
                    examples_props.FILES_LISTED)


def _source_row(source: dict) -> dict:
    row = {k: source[k] for k in SOURCE_KEYS if k in source}
    for measure in SOURCE_MEASURES:
        per_split = source.get(measure)
        if isinstance(per_split, dict):
            row.update({f"{measure}_{split}": n for split, n in per_split.items()})
    if "epochs" in source:
        row["epochs"] = source["epochs"]
    return row


def data_facts(examples: dict) -> dict:
    """data_sources, data_counts and input_fingerprint from the properties TextExampleGen records
    on its Examples (components/text_example_gen/component.py: record_outputs): one row per raw
    source; the counts: every integer property but the per-source counters (in the rows)."""
    try:
        sources = json.loads(examples.get(examples_props.SOURCES) or "[]")
    except (TypeError, ValueError):
        sources = []
    rows = [_source_row(s) for s in sources if isinstance(s, dict)]
    if not rows and examples_props.INPUT in examples:
        rows = [{k: examples[k] for k in FLAT_SOURCE_KEYS if k in examples}]
    counts = {k: v for k, v in sorted(examples.items())
              if isinstance(v, int) and not isinstance(v, bool) and not k.startswith("source_")}
    return {"data_sources": rows, "data_counts": counts,
            "input_fingerprint": examples.get(examples_props.INPUT_FINGERPRINT)}
