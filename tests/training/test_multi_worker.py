"""MultiWorkerMirroredStrategy through TF_CONFIG: two worker processes on loopback ports end with
the same weights, equal (within 1e-5) to single-process training on the same global batch."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import portpicker
import pytest

from components.training import loop
from tests.training.conftest import tiny_config

pytestmark = pytest.mark.slow

OVERRIDES = ["train.train_steps=3", "train.checkpoint_every=2"]


def config_args(*overrides):
    # The same settings tiny_config() applies, as CLI overrides for the worker processes.
    from tests.training.conftest import SEQ_LEN
    base = [f"data.seq_len={SEQ_LEN}", "model.n_layer=2", "model.d_model=32", "model.n_head=2",
            "train.global_batch_size=16", "train.train_steps=3", "train.warmup_steps=1",
            "train.learning_rate=1e-3", "train.min_learning_rate=1e-4", "train.shuffle_buffer=256",
            "train.log_every=1", "train.checkpoint_every=100", *overrides]
    return [arg for item in base for arg in ("--set", item)]


def test_two_workers_match_single_process(shards, tmp_path):
    examples = tmp_path / "examples"
    os.makedirs(examples)
    shutil.copytree(os.path.dirname(shards["train"]), examples / "Split-train")
    ports = [portpicker.pick_unused_port() for _ in range(2)]
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    bigtrain = os.path.join(os.path.dirname(sys.executable), "bigtrain")
    procs = []
    for index in range(2):
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster,
                                                     "task": {"type": "worker", "index": index}}),
                   TF_CPP_MIN_LOG_LEVEL="2")
        procs.append(subprocess.Popen(
            [bigtrain, "plumbing", "train-worker", "--examples", str(examples), "--out", str(tmp_path / f"w{index}"),
             "--weights-out", str(tmp_path / f"w{index}.npz"),
             *config_args(*OVERRIDES, "runtime.strategy=multi_worker_mirrored")],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        assert proc.returncode == 0, err[-3000:]
        outputs.append(json.loads(out.strip().splitlines()[-1]))
    assert [o["num_replicas"] for o in outputs] == [2, 2]
    assert [o["is_chief"] for o in outputs] == [True, False]
    assert os.path.exists(tmp_path / "w0" / "serving_model" / "saved_model.pb")   # chief only
    assert not os.path.exists(tmp_path / "w1" / "serving_model")

    worker_weights = [np.load(tmp_path / f"w{i}.npz") for i in range(2)]
    single = loop.train(tiny_config(*OVERRIDES), shards["train"], str(tmp_path / "single_run"),
                        str(tmp_path / "single_ckpt"))
    reference = single.model.get_weights()
    for weights in worker_weights:
        values = [weights[f"arr_{i}"] for i in range(len(weights.files))]
        assert len(values) == len(reference)
        assert max(float(np.max(np.abs(a - b))) for a, b in zip(values, reference)) <= 1e-5
