"""The run report's Trainer line: spike rollbacks and the batches they skipped are named when
there were any (the Model's MLMD properties spike_rollbacks / skipped_batches, written by the
Trainer executor from training_summary), and the preempted state reads as such."""

from pipeline.lineage.report import StageReport, TRAINING_FIGURES, summarize

MODEL = {"id": 7, "uri": "/m", "steps": 100, "eval_loss": 2.5, "unigram_baseline_loss": 3.1,
         "tokens_per_second": 1000.0}


def trainer(state="complete", note="", **figures) -> StageReport:
    return StageReport(node="Trainer", state=state, duration_s=1.0, execution_id=3,
                       outputs={"Model": dict(MODEL, **figures)}, note=note)


def test_rollbacks_are_named_on_the_trainer_line_only_when_there_were_some():
    line = summarize(trainer(spike_rollbacks=1, skipped_batches=4))
    assert line.endswith("tokens/s, 1 spike rollback(s) skipping 4 batches")
    assert "rollback" not in summarize(trainer(spike_rollbacks=0, skipped_batches=0))
    assert {"spike_rollbacks", "skipped_batches"} <= set(TRAINING_FIGURES)


def test_a_preempted_trainer_says_so_with_its_message():
    stage = trainer(state="preempted", note="training preempted at step 21 of 400: ...")
    stage.outputs = {}
    assert summarize(stage) == "preempted: training preempted at step 21 of 400: ..."
