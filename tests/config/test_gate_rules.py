"""Settings that would silently do nothing are config errors naming the setting (issue 57):
train.keep_best with no validation inside the run, and a code-task gate with no code tasks."""

import pytest

from components.config import ConfigError, build_config


def test_keep_best_needs_a_validation_inside_the_run():
    """keep_best with eval_every above train_steps (the default 250 on a 20-step run: no
    validation, nothing kept, silently) is an error naming train.eval_every; eval_every equal to
    train_steps (one validation, at the end) is fine. Catches the rule's > turned into >= or
    dropped."""
    with pytest.raises(ConfigError, match=r"train\.eval_every: 250 > train\.train_steps 20 with "
                                          r"train\.keep_best"):
        build_config("tiny", overrides=["train.train_steps=20", "train.warmup_steps=2", "train.keep_best=true"])
    build_config("tiny", overrides=["train.train_steps=20", "train.warmup_steps=2", "train.eval_every=20",
                                    "train.keep_best=true"])
    build_config("tiny", overrides=["train.train_steps=20", "train.warmup_steps=2"])     # no keep_best: validation off


@pytest.mark.parametrize("overrides", [["eval.task_items=0"], ["eval.sets=[]"]])
def test_a_task_gate_without_tasks_is_an_error(overrides):
    """eval.min_task_choice_accuracy on with tasks off (task_items 0, or no held-out set) names
    the setting. Catches the gate left on over tasks that never run (blessed, no line)."""
    with pytest.raises(ConfigError, match=r"eval\.min_task_choice_accuracy: 0\.5 gates code tasks "
                                          r"that never run"):
        build_config("tiny", overrides=["eval.min_task_choice_accuracy=0.5", *overrides])
    build_config("tiny", overrides=["eval.min_task_choice_accuracy=0.5"])
