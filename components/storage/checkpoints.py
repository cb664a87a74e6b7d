"""The checkpoint layout, the one place that knows it (training writes it, the pipeline and the
runners find and clean it):

  <parent>/checkpoints/                      FOLDER: under the pipeline root, a worker's --out
                                             folder or a tuner trial's folder
    <key>/                                   keyed_dir: one folder per training config, parent
                                             model and examples, so a re-run resumes
      checkpoint                             TF's state file, replaced atomically: lists the
                                             complete checkpoints
      ckpt-<step>.index, .data-*-of-*        one checkpoint (CHECKPOINT_NAME)
      input-<layout digest>/state-<step>.*   the training input's state after that step
                                             (components/training/feed.py), per input layout
      history.json                           HISTORY_FILE: every figure logged to TensorBoard and
                                             the trackers up to the newest checkpoint (written
                                             just before it), and the log folder that run wrote:
                                             a resumed run starts its curves from it
      .worker-<task>/                        a non-chief worker's own copy of all of the above
      *_temp/                                a save in progress (TF), never read

Through components.storage.fs: every folder may be s3:// or gs://.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re

from components.storage import fs

FOLDER = "checkpoints"
CHECKPOINT_NAME = "ckpt"        # tf.train.CheckpointManager(checkpoint_name=...)
STATE_FILE = "checkpoint"       # TF's list of the complete checkpoints of a folder
INPUT_STATE_PREFIX = "state-"  # <input-state folder>/state-<step>.*
HISTORY_FILE = "history.json"  # {"log_dir": ..., "points": [[step, {tag: value}], ...]}
_SAVED_FILE = r"^{prefix}(\d+)\.(index|data-\d+-of-\d+)$"   # the files of one tf.train save


def root(parent: str) -> str:
    """The checkpoint folder under `parent` (pipeline root, a worker's --out, a trial folder)."""
    return fs.join(parent, FOLDER)


def keyed_dir(checkpoint_root: str, training_view: str, base_model, train_files) -> str:
    """The checkpoints of one training: keyed by the training config (after tuning, as JSON), the
    parent model and the examples. They outlive a failed execution (whose output folders are
    abandoned), so re-running the same pipeline resumes."""
    key = hashlib.sha256((training_view + "|" + str(base_model or "") + "|"
                          + "|".join(train_files)).encode())
    return fs.join(checkpoint_root, key.hexdigest()[:16])


def worker_dir(folder: str, task: int) -> str:
    """A non-chief worker's own folder inside `folder`: every worker takes part in saving
    (collectives), but only the chief's files count."""
    return fs.join(folder, f".worker-{task}")


def step_of(checkpoint_prefix: str) -> int:
    """The step of a checkpoint prefix (<folder>/ckpt-<step>)."""
    return int(checkpoint_prefix.rsplit("-", 1)[-1])


def input_state_folder(checkpoint_dir: str, layout: str) -> str:
    """<checkpoint folder>/input-<digest of the layout>: one folder per input layout, so a state
    saved under another layout is never read."""
    return fs.join(checkpoint_dir, f"input-{hashlib.sha256(layout.encode()).hexdigest()[:16]}")


def input_state_prefix(checkpoint_dir: str, layout: str, step: int) -> str:
    return fs.join(input_state_folder(checkpoint_dir, layout), f"{INPUT_STATE_PREFIX}{step}")


def prune_input_states(checkpoint_dir: str, layout: str, kept_steps: set[int]) -> None:
    """Remove the input states of steps whose checkpoints are no longer kept."""
    folder = input_state_folder(checkpoint_dir, layout)
    for name in fs.listdir(folder):
        match = re.match(_SAVED_FILE.format(prefix=INPUT_STATE_PREFIX), name)
        if match and int(match.group(1)) not in kept_steps:
            fs.remove(fs.join(folder, name))


def write_history(checkpoint_dir: str, log_dir: str, points: dict[int, dict]) -> None:
    """The figures logged so far ({step: {tag: value}}) and the folder whose TensorBoard events
    hold them, replacing the previous history (atomically: fs.write_text)."""
    fs.makedirs(checkpoint_dir)   # before the folder's first checkpoint creates it
    fs.write_text(fs.join(checkpoint_dir, HISTORY_FILE), json.dumps(
        {"log_dir": log_dir, "points": [[step, points[step]] for step in sorted(points)]}))


def read_history(checkpoint_dir: str, up_to_step: int) -> tuple[str, dict[int, dict]]:
    """(the log folder that wrote it, {step: figures} for the steps <= up_to_step: those of the
    checkpoint a run resumes from; later ones it trains again); ("", {}) without a history."""
    path = fs.join(checkpoint_dir, HISTORY_FILE)
    if up_to_step <= 0 or not fs.exists(path):
        return "", {}
    history = json.loads(fs.read_text(path))
    return history["log_dir"], {int(step): figures for step, figures in history["points"]
                                if int(step) <= up_to_step}


def _is_save_temp(name: str) -> bool:
    return name.endswith("_temp") or "_temp_" in name


def _save_temp_dirs(checkpoint_root: str, files: list[str]) -> set[str]:
    """Save-temp folders (relative), empty ones included (a failed save removes its partial file
    but may leave the folder): <key>/ckpt-N_temp, and one level down <key>/input-<layout>/
    state-N_temp and a worker folder's."""
    found = set()
    for rel in files:
        parts = rel.split("/")[:-1]
        for depth, name in enumerate(parts):
            if _is_save_temp(name):
                found.add("/".join(parts[:depth + 1]))
                break
    folders = [""]
    for depth in range(3):                       # the keys, their folders, one level below
        below = []
        for rel in folders:
            for name in (n.rstrip("/") for n in fs.listdir(fs.join(checkpoint_root, rel))):
                child = f"{rel}/{name}" if rel else name
                if depth and _is_save_temp(name):
                    found.add(child)
                elif depth < 2 and fs.isdir(fs.join(checkpoint_root, child)):
                    below.append(child)
        folders = below
    return found


def prune_partial_checkpoints(checkpoint_root: str) -> list[str]:
    """Remove checkpoint files a failed save left behind (not listed in their folder's
    `checkpoint` state file, which TF replaces atomically) and save-temp folders: resume and
    readers only ever see complete checkpoints. Returns what was removed."""
    removed = []
    if not fs.isdir(checkpoint_root):
        return removed
    files = list(fs.walk_files(checkpoint_root))
    temp_dirs = _save_temp_dirs(checkpoint_root, files)
    for rel in sorted(temp_dirs):
        removed.append(fs.join(checkpoint_root, *rel.split("/")))
        fs.rmtree(removed[-1])
    names_by_folder: dict[str, list[str]] = {}
    for rel in files:
        if not any(rel.startswith(d + "/") for d in temp_dirs):
            names_by_folder.setdefault(posixpath.dirname(rel), []).append(posixpath.basename(rel))
    for folder, names in sorted(names_by_folder.items()):
        base = fs.join(checkpoint_root, *folder.split("/")) if folder else checkpoint_root
        state = fs.join(base, STATE_FILE)
        listed = ({posixpath.basename(m) for m in re.findall(r'"([^"]+)"', fs.read_text(state))}
                  if fs.exists(state) else set())
        for name in names:
            match = re.match(_SAVED_FILE.format(prefix=CHECKPOINT_NAME + "-"), name)
            if match and f"{CHECKPOINT_NAME}-{match.group(1)}" not in listed:
                removed.append(fs.join(base, name))
                fs.remove(removed[-1])
    return removed
