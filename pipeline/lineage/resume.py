"""Which later run carried on the training of a preempted Trainer. A preempted Trainer records no
Model or ModelRun (its execution fails, exit 75); its figures up to the stopped step live on in
the checkpoint folder's history and every run that resumes from that folder writes them into its
own ModelRun's TensorBoard events first (components/training/window.py StepLog.resume). So the
curves of a preempted run are found on the page of the run whose Model completed that training.
"""

from __future__ import annotations

import re

from components.model import properties as model_props
from pipeline.lineage.store import Lineage, properties

# The TrainingPreempted message (components/training/loop.py _preempted), recorded on the
# execution (record.PREEMPTED): "training preempted at step N of M: checkpoint <dir>/<name>-N
# with its input state (...)".
_STOPPED = re.compile(r"preempted at step (\d+) of \d+: checkpoint (.+?) with its input state")


def stopped_at(note: str) -> tuple[int, str] | None:
    """(the stopped step, its checkpoint folder) from a preempted Trainer's message; None when the
    message does not name them."""
    found = _STOPPED.search(note or "")
    if not found:
        return None
    return int(found.group(1)), found.group(2).rsplit("/", 1)[0]


def resumed_by(lin: Lineage, note: str, since_ms: int) -> str | None:
    """The run that completed the training a Trainer preempted at since_ms stopped (note: its
    message): the first Model created after it, from the same checkpoint folder, resumed at the
    stopped step or later (after a chain of preemptions, the last run's: its curves hold every
    earlier run's figures from step 1). None while no run has completed it."""
    stopped = stopped_at(note)
    if stopped is None:
        return None
    step, folder = stopped
    models = sorted((m for m in lin.store.get_artifacts_by_type("Model")
                     if m.create_time_since_epoch >= since_ms), key=lambda m: m.id)
    for model in models:
        props = properties(model)
        if props.get(model_props.CHECKPOINT_DIR) == folder \
                and int(props.get(model_props.RESUMED_FROM_STEP, -1)) >= step:
            producer = lin.producer(model.id)
            runs = lin.runs_of_execution(producer) if producer is not None else []
            if runs:
                return runs[0]
    return None
