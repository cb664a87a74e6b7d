"""Preliminary, outside the pipeline (TokenizerGen is not wired yet): eval bits per byte of the
`tiny` GPT trained with the byte tokenizer vs a SentencePiece tokenizer on the default corpus.

Both models see the same amount of raw text (--train-bytes UTF-8 bytes of train documents, so
the SentencePiece model takes fewer steps of the same batch shape), and are measured on the same
eval documents in bits per byte (total nats / raw bytes / ln 2, raw bytes from
token_byte_lengths). Training is plain Keras fit with a constant learning rate, not bigtrain's
train step: this compares tokenizers, not the trainer. Prints the machine with the figures.

    .venv/bin/python benchmarks/tokenizer_bits_per_byte.py [--train-bytes 2000000]
"""

import argparse
import dataclasses
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from benchmarks._machine import describe  # noqa: E402
from components.tokenizer import metrics, stage  # noqa: E402
from benchmarks.support.single_process import read_split_documents, sample_documents  # noqa: E402
from components.config import build_config  # noqa: E402


def windows(tokenizer, texts, seq_len):
    """The packing rule without padding: [BOS] doc [EOS] ... cut into seq_len + 1 windows that
    overlap by one id; the incomplete tail is dropped."""
    stream = np.concatenate([tokenizer.document_ids(t) for t in texts])
    starts = range(0, len(stream) - seq_len, seq_len)
    return np.stack([stream[s:s + seq_len + 1] for s in starts]).astype(np.int32)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--train-bytes", type=int, default=2_000_000)
    parser.add_argument("--eval-bytes", type=int, default=300_000)
    parser.add_argument("--vocab-size", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    import keras
    import tensorflow as tf
    from components.model.gpt import GPT

    print(describe())
    config = build_config("tiny")
    seq_len, m = config.data.seq_len, config.model
    docs = [(split, d.id, d.text.decode("utf-8")) for split, d in read_split_documents(config.data)]
    train_texts = sample_documents(
        [(i, t) for s, i, t in docs if s == "train"], args.train_bytes).texts
    eval_texts = sample_documents(
        [(i, t) for s, i, t in docs if s == "eval"], args.eval_bytes).texts
    raw_eval = sum(len(t.encode()) for t in eval_texts)
    print(f"tiny GPT (n_layer {m.n_layer}, d_model {m.d_model}, seq_len {seq_len}), batch "
          f"{args.batch_size}, {args.train_bytes} train bytes, {raw_eval} eval bytes")
    for kind in ("bytes", "sentencepiece"):
        data = dataclasses.replace(config.data, tokenizer=kind, vocab_size=args.vocab_size)
        with tempfile.TemporaryDirectory() as out:
            tokenizer, figures = stage.build_tokenizer(data, out)
        train_windows = windows(tokenizer, train_texts, seq_len)
        eval_windows = windows(tokenizer, eval_texts, seq_len)
        steps = len(train_windows) // args.batch_size                # one pass over the text
        keras.utils.set_random_seed(config.train.seed)
        model = GPT(context_length=seq_len, n_layer=m.n_layer, n_head=m.n_head,
                    d_model=m.d_model, mlp_ratio=m.mlp_ratio, vocab_size=tokenizer.vocab_size)
        model.compile(optimizer=keras.optimizers.AdamW(config.train.learning_rate,
                                                       weight_decay=config.train.weight_decay),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        train = tf.data.Dataset.from_tensor_slices(
            (train_windows[:, :-1], train_windows[:, 1:])).shuffle(
            len(train_windows), seed=1).batch(args.batch_size, drop_remainder=True)
        start = time.monotonic()
        model.fit(train, epochs=1, verbose=0)
        seconds = time.monotonic() - start
        nats = 0.0
        for i in range(0, len(eval_windows), 64):
            batch = eval_windows[i:i + 64]
            logits = model(batch[:, :-1], training=False)
            nats += float(tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=batch[:, 1:], logits=logits)))
        targets = eval_windows[:, 1:]
        raw_bytes = int(tokenizer.token_byte_lengths()[targets].sum())
        print(f"{kind:14s} vocab {tokenizer.vocab_size:5d}  bytes/token "
              f"{figures['bytes_per_token']:.3f}  steps {steps:4d} ({seconds:.0f} s)  eval "
              f"{nats / targets.size:.3f} nats/token  "
              f"{metrics.bits_per_byte(nats, raw_bytes):.3f} bits/byte over {raw_bytes} bytes")


if __name__ == "__main__":
    main()
