import os

import numpy as np
import pytest
import tensorflow as tf

from components.storage import listing
from components.corpus.documents import split_for
from tests.support.fork_server import SESSION_HANG_GUARD_S
from tests.support import sequences
from components.text_example_gen import shards as shard_files
from components.config import build_config
from tests.conftest import PLAIN_STEP

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
# The plain step (tests/conftest.py PLAIN_STEP): a test that compiles asks for runtime.xla=on.
TINY_OVERRIDES = (
    f"data.seq_len={SEQ_LEN}", "model.n_layer=2", "model.d_model=32", "model.n_head=2",
    "model.n_kv_head=1",
    "train.global_batch_size=16", "train.train_steps=3", "train.warmup_steps=1",
    "train.learning_rate=1e-3", "train.min_learning_rate=1e-4", "train.shuffle_buffer=256",
    "train.log_every=1", "train.checkpoint_every=100", PLAIN_STEP)


def tiny_config(*overrides):
    """The default (llama) block with grouped-query attention: 2 query heads, 1 key/value head."""
    return build_config("tiny", overrides=[*TINY_OVERRIDES, "runtime.strategy=one_device",
                                           *overrides])


# A guard against a hung collective (a worker waiting for a peer that never comes), not a speed
# check. A worker needs ~30-60 CPU-s (the traced step, the chief's export); on a 2-core VM shared
# by ~25 busy processes (2026-11-27) two workers took over 300 s of wall: far above any such load.
# The session's fork server waits with this guard.
WORKER_TIMEOUT_S = SESSION_HANG_GUARD_S


@pytest.fixture(scope="session")
def worker_server(bigtrain_server):
    """The multi-worker tests' train-workers (`bigtrain plumbing train-worker`) are forks of the
    session's one fork server (tests/conftest.py bigtrain_server), not fresh interpreters
    importing TensorFlow again; nothing of TensorFlow's runtime starts before the fork, so each
    worker starts its own, with its own TF_CONFIG (each command's environment is its caller's).
    Until 2026-11-29 they had a server of their own, which imported TensorFlow once more per
    xdist worker: the bigtrain modules it preloaded cost 0.07 CPU-s after the third-party ones."""
    return bigtrain_server
