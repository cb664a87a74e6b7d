"""The bad-input matrix, slow half: kill -9 during training and during push (with a concurrent run
refused while the first one trains), a full disk while writing shards and while writing
checkpoints, and input that matches no files. Each case works on a copy of the shared trained home
(its cached data stage is reused; training re-runs there because checkpoints live under the copy)
and asserts the message, the exit code, and that nothing already written was lost or partial.

Full disk: a real tmpfs of a few MB mounted (as root) over the stage's output folder, so the
kernel itself answers ENOSPC; where mounting is not permitted the two disk tests skip, saying so
(tests/runners/test_disk_full.py covers the classification and the clean-up without a mount)."""

import os
import shutil
import signal
import time

import pytest

from runners.cli import app as cli
from components.storage.checkpoints import HISTORY_FILE
from components.common.errors import EXIT_DISK_FULL, EXIT_FAILED, EXIT_LOCKED
from components.push.push import PAUSE_BEFORE_PUBLISH
from components.training.loop import PAUSE_AFTER_CHECKPOINT
from tests.support.disks import small_disk
from tests.e2e.conftest import MEASURED_DEPTH, ONE_DEVICE, base_args
from tests.support.pipeline_run import lineage_json, run_cli

pytestmark = pytest.mark.slow
LOOSE_EVAL = ["--set", "eval.max_loss=100", "--set", "eval.max_loss_regression=100"]


@pytest.fixture
def home_copy(failed_run, tmp_path):
    """A copy of the chain's home after all its runs (artifacts it references stay in the
    original): the chain's home is only read (tests/e2e/conftest.py chain)."""
    home = str(tmp_path / "home")
    shutil.copytree(failed_run.home, home, symlinks=True)
    return home


def snapshot(root) -> dict:
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            if os.path.isfile(path):
                out[os.path.relpath(path, root)] = os.path.getsize(path)
    return out


def wait_for(predicate, timeout, what, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process ended ({proc.returncode}) while waiting for {what}")
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def checkpoint_dir(home, ignore=()):
    """The checkpoint folder of this test's training config (the copied home holds others)."""
    root = os.path.join(home, "pipelines", "bigtrain", "checkpoints")
    dirs = [os.path.join(root, d) for d in sorted(os.listdir(root)) if d not in ignore] \
        if os.path.isdir(root) else []
    return dirs[0] if dirs else None


def checkpoint_dirs(home):
    root = os.path.join(home, "pipelines", "bigtrain", "checkpoints")
    return set(os.listdir(root)) if os.path.isdir(root) else set()


def complete_checkpoints(directory) -> list[str]:
    """Checkpoints listed in the state file, each asserted whole (index + data present)."""
    with open(os.path.join(directory, "checkpoint")) as fh:
        listed = sorted({line.split('"')[1] for line in fh if '"' in line})
    for name in listed:
        assert os.path.exists(os.path.join(directory, name + ".index")), name
        assert os.path.exists(os.path.join(directory, name + ".data-00000-of-00001")), name
    return listed


def served(home):
    base = os.path.join(home, "serving", "gpt")
    return sorted(n for n in os.listdir(base) if n.isdigit()) if os.path.isdir(base) else []


def test_kill_9_during_training_and_during_push(home_copy, corpus, capsys, bigtrain_server):
    """A trains; a second run is refused (exit 4, names A) and lineage answers meanwhile; A is
    killed -9 after a checkpoint: lineage shows it abandoned. B takes the stale lock over (note),
    records A abandoned in MLMD, resumes training from A's checkpoint, and is killed -9 in the
    middle of its push: no partial version is served. C pushes; A and B stay abandoned. A and B
    are processes of their own (forks of the session's bigtrain_server), C runs in this one."""
    # CI-sized; the float model only, evaluated on 2 batches: B's int8 and TFLite exports and
    # their evaluation proved nothing here (the variants are the chain's data_run's to test:
    # tests/e2e/test_pipeline.py), and no assertion here reads an evaluation figure. One device:
    # a resume under MirroredStrategy is the preempted run's (tests/e2e/test_preempted_run.py).
    short = ["--set", "train.train_steps=40", "--set", "train.checkpoint_every=20",
             "--set", "export.quantize=[]", "--set", "eval.max_batches=2",
             "--set", "eval.sets=[]", *ONE_DEVICE]   # held-out set and code tasks: the chain's
    argv = ["run", "--home", home_copy, *base_args(corpus[0]), *LOOSE_EVAL, *short]
    before_served = served(home_copy)
    copied = checkpoint_dirs(home_copy)
    runs_before = len(lineage_json(capsys, home_copy, "runs"))
    # A holds still after its first checkpoint until it is killed: it is training, whatever the
    # machine's speed, while the refused run and the lineage reads below happen
    a = bigtrain_server.bigtrain(argv, dict(os.environ, **{PAUSE_AFTER_CHECKPOINT: "600"}),
                                 output=os.path.join(home_copy, "..", "a.out"))
    try:
        wait_for(lambda: checkpoint_dir(home_copy, copied) and os.path.exists(
            os.path.join(checkpoint_dir(home_copy, copied), "checkpoint")), 300,
            "A's first checkpoint", a)
        from runners.local.lock import read_holder
        assert read_holder(home_copy)["pid"] == a.pid
        # a concurrent run on the same home: refused at once, naming the holder
        capsys.readouterr()
        code = cli.main(["run", "--home", home_copy, *base_args(corpus[0]), *short])
        err = capsys.readouterr().err
        assert code == EXIT_LOCKED and f"in use by another run: pid {a.pid}" in err, err
        assert "bigtrain run --home " + home_copy in err
        # "at once", without a clock: refused while A still runs and holds the lock (a run that
        # waited for the lock would return only after A ended, and would then run itself)
        assert a.poll() is None and read_holder(home_copy)["pid"] == a.pid
        # lineage reads do not wait for the run
        runs = lineage_json(capsys, home_copy, "runs")
        assert runs[0]["stages"]["Trainer"] == "running" and runs[0]["state"] == "running"
        os.kill(a.pid, signal.SIGKILL)
        a.wait()
    finally:
        if a.poll() is None:
            a.kill()
    runs = lineage_json(capsys, home_copy, "runs")
    run_a = runs[0]["run_id"]
    assert runs[0]["state"] == "abandoned" and runs[0]["stages"]["Trainer"] == "abandoned"
    why = lineage_json(capsys, home_copy, "why", run_a)
    assert [f["node"] for f in why["failed"]] == ["Trainer"] and why["failed"][0]["state"] == "abandoned"
    kept = complete_checkpoints(checkpoint_dir(home_copy, copied))
    assert kept and served(home_copy) == before_served

    # B: takes the lock over, records A abandoned, resumes, and is killed in the middle of its push
    log_b_path = os.path.join(home_copy, "..", "b.out")
    b = bigtrain_server.bigtrain(argv, dict(os.environ, **{PAUSE_BEFORE_PUBLISH: "120"}),
                                 output=log_b_path)
    base = os.path.join(home_copy, "serving", "gpt")
    try:
        wait_for(lambda: any(n.startswith(".incoming-") for n in os.listdir(base)), 300,
                 "B's push staging", b)
        os.kill(b.pid, signal.SIGKILL)
        b.wait()
    finally:
        if b.poll() is None:
            b.kill()
    out_b = open(log_b_path).read()
    assert f"took over the lock of a run that died without releasing it (pid {a.pid}" in out_b
    assert "execution(s) left running by a dead process recorded as abandoned" in out_b
    assert served(home_copy) == before_served  # a reader never sees B's half-pushed model
    runs = lineage_json(capsys, home_copy, "runs")
    assert runs[0]["stages"]["Pusher"] == "abandoned" and runs[0]["stages"]["Trainer"] == "complete"
    assert runs[1]["run_id"] == run_a and runs[1]["state"] == "abandoned"

    # C: takes over from B, removes B's staging folder, pushes; A and B recorded abandoned in MLMD
    c = run_cli(capsys, home_copy, *base_args(corpus[0]), *LOOSE_EVAL, *short)
    assert c.exit_code == 0, c.stderr
    assert "took over the lock" in c.stdout and ".incoming-" in c.stdout
    assert not [n for n in os.listdir(base) if n.startswith(".incoming-")]
    assert len(served(home_copy)) == len(before_served) + 1
    assert os.path.exists(os.path.join(base, served(home_copy)[-1], "saved_model.pb"))
    from pipeline.lineage import record
    from pipeline.lineage.store import Lineage, properties
    lin = Lineage(c.store())  # no live-writer hint: what MLMD itself records
    states = {r["run_id"]: r["state"] for r in lineage_json(capsys, home_copy, "runs")}
    assert len(states) == runs_before + 3
    for run_id in (run_a, runs[0]["run_id"]):
        assert states[run_id] == "abandoned"
        left = [e for e in lin.executions_of(lin.run(run_id)) if lin.state(e) == "abandoned"]
        assert left and all(record.ABANDONED_BY in properties(e) for e in left)
    from pipeline.lineage.report import format_report, run_report
    report_a = run_report(c.store(), run_id=run_a)
    assert report_a.stage("Trainer").state == "abandoned"
    assert "abandoned: left running by a process that died; recorded by run" in format_report(report_a)
    trainer_b = [e for e in lin.executions_of(lin.run(runs[0]["run_id"])) if lin.node_of[e.id] == "Trainer"]
    model_b = lin.outputs(trainer_b[0].id)["model"][0]
    assert properties(lin.artifact(model_b))["resumed_from_step"] >= 20  # resumed from A's checkpoint


def test_disk_full_while_writing_shards(home_copy, corpus, capsys):
    runs_before = len(lineage_json(capsys, home_copy, "runs"))   # the chain's
    before = snapshot(home_copy)
    stage_dir = os.path.join(home_copy, "pipelines", "bigtrain", "TextExampleGen")
    with small_disk(stage_dir, "96k"):
        run = run_cli(capsys, home_copy, *base_args(corpus[0]), "--set", "data.seq_len=32",
                      "--set", "data.train_shards=2")
        assert run.exit_code == EXIT_DISK_FULL, (run.stdout[-2000:], run.stderr)
        # the folder named: the stage's output folder when a Beam step ran out (pieces, shards),
        # the home when TFX's own write did
        assert "no space left on device while writing" in run.stderr and home_copy in run.stderr
        assert "Traceback" not in run.stderr
        left = [os.path.join(d, n) for d, _, names in os.walk(stage_dir) for n in names]
        assert left == [], left  # the failed stage's partial output folder was removed
    assert run.states()["TextExampleGen"] == "failed"
    after = snapshot(home_copy)
    grows = ("metadata.sqlite", ".bigtrain.lock")  # MLMD records the failed run; the lock is emptied
    assert {k: v for k, v in after.items() if k in before and k not in grows} == \
        {k: v for k, v in before.items() if k not in grows}  # nothing earlier changed or lost
    assert len(lineage_json(capsys, home_copy, "runs")) == runs_before + 1  # + this failed one


def test_disk_full_while_writing_checkpoints(home_copy, corpus, capsys):
    ckpt_root = os.path.join(home_copy, "pipelines", "bigtrain", "checkpoints")
    before_served = served(home_copy)
    # ckpt-20 (~3.1 MB) and its input state (~2-3 MB: 4 shuffle buffers) fit, ckpt-40 does not
    with small_disk(ckpt_root, "7m"):
        run = run_cli(capsys, home_copy, *base_args(corpus[0]), "--set", "train.checkpoint_every=20",
                      *MEASURED_DEPTH)   # the sizes above are the 4-block model's
        assert run.exit_code == EXIT_DISK_FULL, (run.stdout[-2000:], run.stderr)
        assert "no space left on device" in run.stderr and "partial checkpoint" in run.stderr
        directory = checkpoint_dir(home_copy)
        assert complete_checkpoints(directory) == ["ckpt-20"]
        names = sorted(os.listdir(directory))
        inputs = [name for name in names if name.startswith("input-")]  # the input state's folder
        assert names == sorted(["checkpoint", "ckpt-20.data-00000-of-00001", "ckpt-20.index",
                                HISTORY_FILE, *inputs])   # the curves so far (history.json)
        assert len(inputs) == 1, names
        states = sorted(os.listdir(os.path.join(directory, inputs[0])))
        assert states == ["state-20.data-00000-of-00001", "state-20.index"], states
    assert run.states()["Trainer"] == "failed"
    assert served(home_copy) == before_served


def test_input_that_matches_nothing_names_it(home_copy, capsys, tmp_path):
    run = run_cli(capsys, home_copy, "--set", f"data.input={tmp_path}/nothing/*.txt")
    assert run.exit_code == EXIT_FAILED
    assert f"data.input '{tmp_path}/nothing/*.txt'" in run.stderr and "matches no files" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_failed_stage_is_one_line_naming_what_it_quarantined(capfd, tmp_path):
    """A cheap real stage failure (seconds: the data stage on two tiny files, in a fresh home):
    one document packed, and it lands in train, so the eval split is empty. stderr is bigtrain's
    one line and the details hint, without TFX's `E... launcher.py:619] Execution N failed.`;
    the message says inline what was quarantined, and names no file that no longer exists (TFX
    deletes the failed stage's outputs, the quarantine manifest among them)."""
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "a.txt").write_bytes(b"only one document here\n")
    (corpus / "b.txt").write_bytes(b"caf\xe9\n")
    home = str(tmp_path / "home")
    # capfd: absl's handler may write to the stream it was created with (file descriptor 2)
    run = run_cli(capfd, home, "--set", f"data.input={corpus}", "--set", "data.seq_len=16")
    assert run.exit_code == EXIT_FAILED, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 2 and lines[1] == f"(details: bigtrain lineage why --home {home})", lines
    assert lines[0].startswith("run FAILED: ValueError: split 'eval' received no sequences")
    assert "1 documents not_utf8; first quarantined: b.txt (not_utf8)" in lines[0]
    named = [word.strip("();,") for word in lines[0].split() if word.startswith(("/", "(/"))]
    assert all(os.path.exists(path) for path in named), named
