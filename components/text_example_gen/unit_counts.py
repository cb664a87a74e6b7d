"""The data stage's counters without runner metrics: each work unit writes its counts into a small
JSON file beside its pieces (ConvertUnitFn, after the unit's pieces are closed), and the stage
sums them once the pipeline has finished, before the pieces are removed.

Any runner carries them (Beam's DaskRunner has no metrics: its result.metrics() raises
NotImplementedError), and a retried unit rewrites its own file (written via a temporary name and
renamed) instead of adding to a total, so a unit counts exactly once, however often it ran."""

from __future__ import annotations

import collections
import json
import os
import re

from components.storage import fs
from components.text_example_gen.shards import PIECES_DIR

_NAME = re.compile(r"^unit-(\d{6})-counts\.json$")


def counts_path(output_dir: str, unit_index: int) -> str:
    return os.path.join(output_dir, PIECES_DIR, f"unit-{unit_index:06d}-counts.json")


def write_counts(output_dir: str, unit_index: int, counts) -> None:
    """One unit's counts (zeros left out), replacing an earlier attempt's."""
    fs.write_text(counts_path(output_dir, unit_index), json.dumps(
        {name: int(value) for name, value in sorted(counts.items()) if value}, sort_keys=True))


def read_counts(output_dir: str, units: int | None = None) -> collections.Counter:
    """Every unit's counts summed. units: how many units the stage planned; a count file missing
    for one of them is an error naming the folder (a runner that dropped work), not a smaller
    total."""
    folder = os.path.join(output_dir, PIECES_DIR)
    names = [name for name in (fs.listdir(folder) if fs.exists(folder) else [])
             if _NAME.match(name)]
    if units is not None and len(names) != units:
        raise RuntimeError(f"unit accounting broken: {units} units planned, {len(names)} wrote "
                           f"their counts in {folder}")
    total: collections.Counter = collections.Counter()
    for name in sorted(names):
        total.update(json.loads(fs.read_text(os.path.join(folder, name))))
    return total
