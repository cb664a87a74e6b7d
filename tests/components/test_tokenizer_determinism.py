"""SentencePiece training gives the same model bytes whatever the machine's core count
(issue 20, item 6)."""

import os
import sysconfig

import pytest

from components.tokenizer import training

STDLIB = sysconfig.get_paths()["stdlib"]


def _sample(max_bytes=200_000):
    texts, held = [], 0
    for name in sorted(os.listdir(os.path.join(STDLIB, "email"))):
        if name.endswith(".py"):
            with open(os.path.join(STDLIB, "email", name), encoding="utf-8") as fh:
                texts.append(fh.read())
            held += len(texts[-1])
            if held > max_bytes:
                break
    return texts


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_model_bytes_do_not_depend_on_the_core_count(monkeypatch, model_type):
    """Fails before the fix for unigram: num_threads was min(os.cpu_count(), 8), and the unigram
    trainer's pieces and scores depend on the thread count (1 vs 8 cores gave different bytes)."""
    texts = _sample()
    models = {}
    for cores in (1, 2, 8):
        monkeypatch.setattr(os, "cpu_count", lambda cores=cores: cores)
        models[cores] = training.train_sentencepiece(texts, 800, model_type)
    assert models[1] == models[2] == models[8]
