"""docs/configuration.md says exactly which sections each stage gets (its cache key): the table's
custom_config sections of the Trainer, the Tuner and the Pusher are the code's."""

from __future__ import annotations

import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def documented_sections(stage: str) -> tuple[str, ...]:
    text = open(os.path.join(REPO, "docs", "configuration.md"), encoding="utf-8").read()
    row = next(line for line in text.splitlines() if line.startswith(f"| `{stage}`"))
    cell = row.split("|")[3]
    listed = cell.split("`custom_config`:", 1)[1].split(";", 1)[0]
    while "(" in listed:   # what a stage reads of a section, in parentheses
        listed = re.sub(r"\([^()]*\)", "", listed)
    return tuple(re.findall(r"`([a-z_]+)`", listed))


@pytest.mark.parametrize("stage", ["Trainer", "Tuner", "Pusher"])
def test_the_table_names_each_stages_sections(stage):
    from components.push.executor import PUSHER_READS
    from components.training.run_fn import TRAINER_READS
    from components.tuner.component import TUNER_READS
    code = {"Trainer": TRAINER_READS, "Tuner": TUNER_READS, "Pusher": PUSHER_READS}
    assert documented_sections(stage) == tuple(code[stage].sections)
