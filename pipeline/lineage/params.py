"""What changed between two executions' parameters: TFX keeps a stage's execution parameters as
custom properties, configs among them as JSON strings; they are flattened to dotted keys so a
diff names the exact setting (`bigtrain lineage diff`, the run report's reason a stage ran again instead of hitting the cache)."""

from __future__ import annotations

import json

from pipeline.lineage import record


def flatten(value, prefix: str = "") -> dict:
    """Nested dicts and JSON strings -> {dotted.key: scalar}, to name exactly what changed."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            value = json.loads(value)
        except ValueError:
            pass
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def changed_parameters(before: dict, after: dict) -> list[tuple[str, object, object]]:
    """(dotted key, before, after) for every execution parameter that differs, flattened into
    JSON-encoded configs. TFX's internal keys (`__*`) and the failure record bigtrain adds after a
    run (bigtrain_error, ...) are not parameters."""
    def parameters(props):
        return flatten({k: v for k, v in props.items()
                        if not k.startswith("__") and k not in record.EXECUTION_RECORD_KEYS})
    flat_before, flat_after = parameters(before), parameters(after)
    return [(k, flat_before.get(k), flat_after.get(k))
            for k in sorted(set(flat_before) | set(flat_after))
            if flat_before.get(k) != flat_after.get(k)]
