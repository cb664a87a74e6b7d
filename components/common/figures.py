"""A stage's figures as ML Metadata custom properties: the one place that turns a Python value
into a property, and that refuses a non-finite number.

MLMD's sqlite store writes a double into the text of its SQL statement: NaN becomes `no such
column: nan`, raised while the execution is still RUNNING, so the run dies on a raw SQL error
and the next run calls the stage abandoned. A NaN or infinite figure instead fails its stage with
NonFiniteError naming the figure, which `bigtrain lineage why` then reports.
"""

from __future__ import annotations

import math

from components.common.errors import NonFiniteError


def require_finite(stage: str, name: str, value: float, hint: str = "") -> float:
    """value, or NonFiniteError naming the stage, the figure and what to do (hint)."""
    if not math.isfinite(value):
        raise NonFiniteError(f"{stage} produced {name} = {value}, not a finite number"
                             + (f": {hint}" if hint else "") + " (nothing non-finite is recorded "
                             "in ML Metadata)")
    return value


def set_figure(artifact, name: str, value, stage: str, *, exact: bool = False,
               hint: str = "") -> None:
    """One custom property by the value's type: text (str, bool, None), integer, or a finite
    float (exact: kept as its repr, since MLMD's sqlite store rounds doubles to 6 decimals)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        artifact.set_string_custom_property(name, str(value))
    elif isinstance(value, int):
        artifact.set_int_custom_property(name, value)
    else:
        number = require_finite(stage, name, float(value), hint)
        if exact:
            artifact.set_string_custom_property(name, repr(number))
        else:
            artifact.set_float_custom_property(name, number)
