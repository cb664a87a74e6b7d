import os

import numpy as np
import pytest
import tensorflow as tf

from components.common import listing
from components.corpus.documents import split_for
from tests.support import sequences
from tests.support.fork_server import ForkServer
from components.text_example_gen import shards as shard_files
from components.config import build_config

SEQ_LEN = 32


@pytest.fixture(scope="session")
def shards(tmp_path_factory, corpus):
    """Train / eval gzip shards of the test corpus, packed with the real packing rule."""
    root, quarantined = corpus
    out = tmp_path_factory.mktemp("shards")
    _, files = listing.list_input_files(root)
    docs = {"train": [], "eval": []}
    for relative, absolute in files:
        if relative not in quarantined:
            docs[split_for(relative, 0.2)].append(open(absolute, "rb").read())
    patterns = {}
    for split, contents in docs.items():
        os.makedirs(out / split)
        with tf.io.TFRecordWriter(str(out / split / "part-0.gz"), options="GZIP") as writer:
            for window in sequences.pack_documents(contents, SEQ_LEN):
                writer.write(shard_files.encode_examples(np.asarray(window)[None])[0])
        patterns[split] = str(out / split / "*.gz")
    return patterns


# The gpt2 block (full multi-head attention: n_kv_head back to 0).
GPT2 = ("model.arch=gpt2", "model.n_kv_head=0")


# What tiny_config() sets over the tiny preset; also the worker processes' CLI overrides
# (test_multi_worker.config_args), so a worker and the single-process reference build one model.
TINY_OVERRIDES = (
    f"data.seq_len={SEQ_LEN}", "model.n_layer=2", "model.d_model=32", "model.n_head=2",
    "model.n_kv_head=1",
    "train.global_batch_size=16", "train.train_steps=3", "train.warmup_steps=1",
    "train.learning_rate=1e-3", "train.min_learning_rate=1e-4", "train.shuffle_buffer=256",
    "train.log_every=1", "train.checkpoint_every=100")


def tiny_config(*overrides):
    """The default (llama) block with grouped-query attention: 2 query heads, 1 key/value head."""
    return build_config("tiny", overrides=[*TINY_OVERRIDES, "runtime.strategy=one_device",
                                           *overrides])


# What `bigtrain plumbing train-worker` imports. The multi-worker tests' workers are forks of one
# server per xdist worker (session-scoped: the modules that start workers share it) that imported
# them (tests/support/fork_server.py), not fresh interpreters importing TensorFlow again (~5 CPU-s
# each); nothing of TensorFlow's runtime starts before the fork, so each worker starts its own,
# with its own TF_CONFIG.
WORKER_IMPORTS = ["runners.cli", "runners.cli_plumbing", "components.serving.export",
                  "components.tokenizer.artifact", "components.training.worker"]
# A guard against a hung collective (a worker waiting for a peer that never comes), not a speed
# check. A worker needs ~30-60 CPU-s (the traced step, the chief's export); on a 2-core VM shared
# by ~25 busy processes (2026-11-27) two workers took over 300 s of wall: far above any such load.
WORKER_TIMEOUT_S = 1800


@pytest.fixture(scope="session")
def worker_server():
    """Each command gets its environment from its caller (TF_CONFIG differs per worker); the
    server's own is the session's at its start, its TensorFlow import counted by the ledger in
    its own group whichever module starts it."""
    from tests.support.ledger import counted_as
    with counted_as("worker-server"):
        server = ForkServer(dict(os.environ), WORKER_IMPORTS, hang_guard_s=WORKER_TIMEOUT_S)
    with server:
        yield server
