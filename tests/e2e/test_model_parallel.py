"""Issue 21 end to end: both model-parallel modes train through `bigtrain run` on logical CPU
devices (a few steps, up to the Trainer). Equality with the reference is the unit tests' job
(tests/training/test_zero.py, test_pipeline_stages.py); this catches a mode that the config,
run_fn, the CPU split before TensorFlow starts, or the checkpoint/export path does not carry."""

import pytest

from tests.e2e.conftest import run_cli

SHORT = ["--set", "data.seq_len=32", "--set", "train.train_steps=10", "--set", "train.warmup_steps=2",
         "--set", "train.log_every=5", "--set", "train.checkpoint_every=5",
         "--set", "model.n_layer=2", "--set", "model.d_model=32", "--set", "model.n_head=2",
         "--set", "train.global_batch_size=8", "--set", "train.accumulation_steps=2",
         "--set", "data.eval_fraction=0.3", "--until", "Trainer"]
MODES = {
    "sharded": ["--set", "runtime.strategy=mirrored", "--set", "train.shard_optimizer_state=true"],
    "pipeline": ["--set", "runtime.strategy=one_device", "--set", "runtime.pipeline_stages=2"],
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_mode_trains_through_bigtrain_run(mode, corpus, tmp_path, session_capsys):
    run = run_cli(session_capsys, str(tmp_path / "home"), "--set", f"data.input={corpus[0]}",
                  *SHORT, *MODES[mode])
    assert run.exit_code == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.states()["Trainer"] == "complete"
    assert "stopped after Trainer" in run.stdout
