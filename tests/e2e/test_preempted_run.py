"""`bigtrain run` preempted: SIGTERM (a real one, to the process) while the Trainer trains makes
the run exit 75 with the Trainer recorded `preempted` (not failed, not abandoned) in MLMD, the run
report and `bigtrain lineage`; the next `bigtrain run` resumes the Trainer at the preempted step
and completes. That the resumed weights equal an uninterrupted run's is checked where it is cheap:
tests/training/test_preemption.py (in process, one train-worker, two workers)."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from components.common.errors import EXIT_PREEMPTED
from runners import cli
from tests.e2e.conftest import base_args, run_cli

pytestmark = pytest.mark.slow
LOOSE_EVAL = ["--set", "eval.max_loss=100", "--set", "eval.max_loss_regression=100"]
# Long enough that the signal, sent once the first checkpoint exists, lands inside training.
TRAINING = ["--set", "train.train_steps=400", "--set", "train.checkpoint_every=20",
            "--set", "train.log_every=20"]


def first_checkpoint_written(home) -> bool:
    root = os.path.join(home, "pipelines", "bigtrain", "checkpoints")
    return os.path.isdir(root) and any(
        os.path.exists(os.path.join(root, key, "checkpoint")) for key in os.listdir(root))


def lineage(capsys, home, *args):
    capsys.readouterr()
    code = cli.main(["lineage", *args, "--home", home, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_sigterm_during_training_is_recorded_preempted_and_the_next_run_resumes(
        corpus, tmp_path, capsys):
    home = str(tmp_path / "home")
    args = ["run", "--home", home, *base_args(corpus[0]), *LOOSE_EVAL, *TRAINING]
    bigtrain = os.path.join(os.path.dirname(sys.executable), "bigtrain")
    log_path = tmp_path / "run.out"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([bigtrain, *args], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 600
        while not first_checkpoint_written(home):
            assert proc.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, "no checkpoint within 600 s"
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = log_path.read_text()
    assert code == EXIT_PREEMPTED, out[-3000:]
    assert "run PREEMPTED: training preempted at step" in out
    stopped_at = int(re.search(r"training preempted at step (\d+) of 400", out).group(1))
    assert 20 <= stopped_at < 400

    runs = lineage(capsys, home, "runs")
    assert runs[0]["state"] == "preempted" and runs[0]["stages"]["Trainer"] == "preempted"
    why = lineage(capsys, home, "why")
    assert [(f["node"], f["state"], f["error_type"]) for f in why["failed"]] == [
        ("Trainer", "preempted", "TrainingPreempted")]

    again = run_cli(capsys, home, *args[3:])
    assert again.exit_code == 0, again.stderr
    states = again.states()
    assert states["Trainer"] == "complete" and states["ExampleValidator"] == "cached"
    model = next(s.outputs["Model"] for s in again.report().stages if s.node == "Trainer")
    assert model["resumed_from_step"] == stopped_at and model["steps"] == 400
    assert "abandoned" not in again.stdout
