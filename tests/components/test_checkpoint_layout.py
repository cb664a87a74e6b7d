"""The checkpoint layout (components/storage/checkpoints.py): the keys and paths existing
checkpoints and input states were written under (a changed key or prefix would silently restart
every training from step 0 and orphan the input states), the file pattern against what
tf.train.CheckpointManager really writes, and the clean-up of what a failed save left (files the
atomically-replaced `checkpoint` state file does not list, and save temp folders), keeping every
complete checkpoint."""

import os

import tensorflow as tf

from components.storage import checkpoints
from components.storage.checkpoints import prune_partial_checkpoints

# The rule the code before the layout had one owner used (run_fn.checkpoint_dir_for of commit
# 89953dd), written out here as the reference a move or a refactor of the key must reproduce:
# the first 16 hex digits of sha256(view | parent | files joined by "|"). The tiny preset's view
# itself changes with the config tree (new model.* fields, the recipe), so the key is checked
# against this rule rather than against a stored digest.
def old_rule_key(view: str, parent, train_files) -> str:
    import hashlib
    text = view + "|" + str(parent or "") + "|" + "|".join(train_files)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# feed.state_prefix of commit 89953dd for this layout string (a stored value: its rule hashes a
# layout the tests do not restate).
STATE_PREFIX = "/ck/key/input-58dd2f3ef13e1fcc/state-40"


def test_keys_and_prefixes_are_the_ones_existing_checkpoints_have():
    import json
    from components import config as config_lib
    from components.training.run_fn import (checkpoint_dir_for, trainer_config,
                                           trainer_custom_config, TRAINER_READS)
    from components.config import stages

    def training_view(config):
        return stages.model_view(TRAINER_READS, config)
    config = config_lib.build_config("tiny")
    train_files = ["/e/Split-train/*"]
    view = json.dumps(training_view(config), sort_keys=True)
    # The view run_fn keys on is the one rebuilt from the Trainer's sections (its custom_config).
    rebuilt = training_view(trainer_config(trainer_custom_config(config, "/root"), None)[0])
    assert rebuilt == training_view(config)
    assert checkpoint_dir_for(rebuilt, "/root/checkpoints", None, train_files) == \
        f"/root/checkpoints/{old_rule_key(view, None, train_files)}"
    assert checkpoint_dir_for(rebuilt, "/root/checkpoints", "parent-uri", train_files) == \
        f"/root/checkpoints/{old_rule_key(view, 'parent-uri', train_files)}"
    assert checkpoints.keyed_dir("/r", view, None, ["/e/Split-train/*", "/f"]) != \
        checkpoints.keyed_dir("/r", view, None, train_files)      # the examples are in the key
    assert checkpoints.input_state_prefix("/ck/key", '{"files": ["a"]}', 40) == STATE_PREFIX
    assert checkpoints.root("/p") == "/p/checkpoints"
    assert checkpoints.worker_dir("/ck/key", 2) == "/ck/key/.worker-2"


def test_the_pattern_matches_what_the_checkpoint_manager_writes(tmp_path):
    """Two real saves are complete (kept); a data file of a third, unlisted save is removed.
    Catches a pattern that no longer matches TF's file names (the partial file would stay, or a
    complete checkpoint would go)."""
    folder = tmp_path / "key"
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)), str(folder),
                                         max_to_keep=3, checkpoint_name=checkpoints.CHECKPOINT_NAME)
    manager.save(checkpoint_number=10)
    manager.save(checkpoint_number=20)
    written = sorted(os.listdir(folder))
    (folder / f"{checkpoints.CHECKPOINT_NAME}-30.data-00000-of-00001").write_bytes(b"x")
    removed = prune_partial_checkpoints(str(tmp_path))
    assert [os.path.basename(p) for p in removed] == ["ckpt-30.data-00000-of-00001"]
    assert sorted(os.listdir(folder)) == written
    assert [checkpoints.step_of(p) for p in manager.checkpoints] == [10, 20]


def test_prune_input_states_keeps_the_kept_steps_only(tmp_path):
    layout = '{"files": ["a"]}'
    folder = checkpoints.input_state_folder(str(tmp_path), layout)
    os.makedirs(folder)
    for step in (10, 20, 30):
        for suffix in ("index", "data-00000-of-00001"):
            open(os.path.join(folder, f"state-{step}.{suffix}"), "w").close()
    open(os.path.join(folder, "notes.txt"), "w").close()
    checkpoints.prune_input_states(str(tmp_path), layout, {20, 30})
    assert sorted(os.listdir(folder)) == ["notes.txt", "state-20.data-00000-of-00001",
                                          "state-20.index", "state-30.data-00000-of-00001",
                                          "state-30.index"]


def test_prune_keeps_complete_checkpoints_only(tmp_path):
    directory = tmp_path / "abc123"
    directory.mkdir()
    (directory / "checkpoint").write_text('model_checkpoint_path: "ckpt-20"\n'
                                          'all_model_checkpoint_paths: "ckpt-10"\n'
                                          'all_model_checkpoint_paths: "ckpt-20"\n')
    complete = ["ckpt-10.index", "ckpt-10.data-00000-of-00001", "ckpt-20.index",
                "ckpt-20.data-00000-of-00001"]
    partial = ["ckpt-30.data-00000-of-00001"]  # the save that hit the full disk
    for name in complete + partial:
        (directory / name).write_bytes(b"x")
    (directory / "ckpt-30_temp").mkdir()
    (directory / "ckpt-30_temp" / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"x")
    removed = prune_partial_checkpoints(str(tmp_path))
    assert sorted(os.path.basename(p) for p in removed) == ["ckpt-30.data-00000-of-00001", "ckpt-30_temp"]
    assert sorted(os.listdir(directory)) == sorted(["checkpoint"] + complete)


def test_prune_removes_an_emptied_save_temp_folder(tmp_path):
    """A save that hit the full disk can remove its partial file and leave ckpt-N_temp/ empty
    (seen in the e2e disk-full run): the folder goes too, though no file inside it names it."""
    directory = tmp_path / "abc123"
    directory.mkdir()
    (directory / "checkpoint").write_text('model_checkpoint_path: "ckpt-20"\n'
                                          'all_model_checkpoint_paths: "ckpt-20"\n')
    for name in ("ckpt-20.index", "ckpt-20.data-00000-of-00001"):
        (directory / name).write_bytes(b"x")
    (directory / "ckpt-40_temp").mkdir()
    removed = prune_partial_checkpoints(str(tmp_path))
    assert [os.path.basename(p) for p in removed] == ["ckpt-40_temp"]
    assert sorted(os.listdir(directory)) == ["checkpoint", "ckpt-20.data-00000-of-00001",
                                             "ckpt-20.index"]


def test_prune_removes_a_failed_input_state_save(tmp_path):
    """The training input's state is saved after its checkpoint, one folder down
    (<key>/input-<layout>/state-N); a save that hit the full disk
    leaves state-N_temp/ there (seen in the e2e disk-full run). It goes; complete states stay.
    Catches a search for temp folders only directly under <key>/."""
    directory = tmp_path / "abc123"
    inputs = directory / "input-0123456789abcdef"
    inputs.mkdir(parents=True)
    (directory / "checkpoint").write_text('model_checkpoint_path: "ckpt-20"\n'
                                          'all_model_checkpoint_paths: "ckpt-20"\n')
    complete = ["state-20.index", "state-20.data-00000-of-00001"]
    for name in complete:
        (inputs / name).write_bytes(b"x")
    (inputs / "state-40_temp").mkdir()
    removed = prune_partial_checkpoints(str(tmp_path))
    assert [os.path.relpath(p, directory) for p in removed] == [
        "input-0123456789abcdef/state-40_temp"]
    assert sorted(os.listdir(inputs)) == sorted(complete)
