"""The model's vocabulary comes from the caller (the tokenizer, or the config's token spec), never
from a default: a default of the byte tokenizer's 259 ids would quietly build a byte-sized model
for any caller that left it out, a SentencePiece run's included."""

import pytest
import tensorflow as tf

from components.config import ModelConfig
from components.model import gpt

CONTEXT, VOCAB = 8, 97          # 97: neither the byte tokenizer's 259 nor a SentencePiece size


def test_vocab_size_has_no_default():
    config = ModelConfig(arch="gpt2", n_layer=1, n_head=2, d_model=16)
    with pytest.raises(TypeError, match="vocab_size"):
        gpt.build_model(config, CONTEXT)
    with pytest.raises(TypeError, match="vocab_size"):
        gpt.GPT(context_length=CONTEXT, n_layer=1, n_head=2, d_model=16)


@pytest.mark.parametrize("tied", [True, False])
def test_built_model_has_the_given_vocabulary(tied):
    config = ModelConfig(arch="llama", n_layer=1, n_head=2, d_model=16, tie_embeddings=tied)
    model = gpt.build_model(config, CONTEXT, vocab_size=VOCAB)
    assert model.vocab_size == VOCAB
    assert tuple(model.token_embedding.embeddings.shape) == (VOCAB, 16)
    assert tuple(model(tf.zeros([2, CONTEXT], tf.int32)).shape) == (2, CONTEXT, VOCAB)
