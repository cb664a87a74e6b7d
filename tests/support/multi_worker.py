"""Multi-worker training run as real processes: the config arguments, the examples folder, running
the workers, reading their weights, forgetting the last checkpoint."""

import json
import os
import shutil

import numpy as np
import portpicker


BIGTRAIN = "runners.cli.app:console_main"   # the console script's entry point (pyproject.toml)


def config_args(*overrides):
    # The same settings tiny_config() applies, as CLI overrides for the worker processes.
    from tests.training.conftest import TINY_OVERRIDES
    base = [*TINY_OVERRIDES, *overrides]
    return [arg for item in base for arg in ("--set", item)]


def _run_workers(server, examples, tmp_path, overrides):
    """Two train-worker processes (`bigtrain plumbing train-worker`, forks of the module's
    worker_server), each with its own --out folder w<i>; their summaries, each with its process's
    output under "log"."""
    ports = [portpicker.pick_unused_port() for _ in range(2)]
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    started = []
    for index in range(2):
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster,
                                                     "task": {"type": "worker", "index": index}}),
                   TF_CPP_MIN_LOG_LEVEL="2")
        started.append(server.start(BIGTRAIN, [
            "bigtrain", "plumbing", "train-worker", "--examples", str(examples),
            "--out", str(tmp_path / f"w{index}"), "--weights-out", str(tmp_path / f"w{index}.npz"),
            *config_args(*overrides, "runtime.strategy=multi_worker_mirrored")], env))
    outputs = []
    try:
        for worker in started:
            code, out, err = server.wait(worker)
            assert code == 0, err[-3000:]
            outputs.append(dict(json.loads(out.strip().splitlines()[-1]), log=out + err))
    finally:
        server.kill(started)   # a peer of a failed or hung worker would wait for it forever
    return outputs


def _forget_last_checkpoint(directory):
    """Drop the newest checkpoint of a CheckpointManager folder (as if the run died before it)."""
    import tensorflow as tf
    state = tf.train.get_checkpoint_state(directory)
    paths = list(state.all_model_checkpoint_paths)
    for name in os.listdir(directory):
        if name.startswith(os.path.basename(paths[-1]) + "."):
            os.remove(os.path.join(directory, name))
    with open(os.path.join(directory, "checkpoint"), "w", encoding="utf-8") as fh:  # its text proto
        fh.write(f'model_checkpoint_path: "{paths[-2]}"\n')
        fh.writelines(f'all_model_checkpoint_paths: "{p}"\n' for p in paths[:-1])


def _weights(path) -> list:
    saved = np.load(path)
    return [saved[f"arr_{i}"] for i in range(len(saved.files))]


def _examples(shards, folder):
    examples = folder / "examples"
    os.makedirs(examples)
    shutil.copytree(os.path.dirname(shards["train"]), examples / "Split-train")
    return examples
