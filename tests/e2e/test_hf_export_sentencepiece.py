"""A SentencePiece run's model (the session's sentencepiece_run, pushed) in the Hugging Face
layout: its own module, so that under xdist it shares the sentencepiece-run group (the fixture is
built once) and not the data_run group of test_hf_export.py."""

import os

import numpy as np
import pytest
import tensorflow as tf

from runners.cli import app as cli
from tests.support.texts import TEXTS
from tests.support.hf_models import keras_hub_backbone, keras_hub_logits

pytestmark = pytest.mark.slow


def test_a_sentencepiece_run_exports_with_its_own_tokenizer(sentencepiece_run, tmp_path):
    """The SentencePiece model read back from the pushed graph is the run's; `tokenizers` gives
    its ids (BPE, the default model type: exactly) and keras-hub the served logits."""
    import tensorflow_text  # noqa: F401  (the pushed graph's SentencePiece ops)
    from tokenizers import Tokenizer
    from components.push.layout import served_versions
    from components.tokenizer.sentencepiece_model import SentencePieceTokenizer
    from tests.support.texts import MULTILINGUAL
    out = str(tmp_path / "sp")
    assert cli.main(["export", "hf", sentencepiece_run.run_id, "--home", sentencepiece_run.home,
                     "--out", out]) == 0
    ours = SentencePieceTokenizer.from_file(os.path.join(out, "tokenizer.model"))
    theirs = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    for text in MULTILINGUAL + [t.decode() for t in TEXTS]:
        assert theirs.encode(text).ids == ours.encode(text).tolist(), text
    base = os.path.join(sentencepiece_run.home, "serving", "gpt")
    pushed = tf.saved_model.load(os.path.join(base, str(served_versions(base)[-1])))
    batch = np.array([[ours.bos_id] + ours.encode(t.decode()).tolist()[:20] for t in TEXTS], np.int32)
    served = pushed.signatures["token_logits"](input_ids=tf.constant(batch))["logits"].numpy()
    assert np.abs(keras_hub_logits(keras_hub_backbone(out), batch) - served).max() < 1e-4
