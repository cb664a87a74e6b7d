"""Bytes per token of the byte tokenizer vs SentencePiece on the default corpus (the running
interpreter's standard library *.py, site-packages excluded), measured on the eval split's
sample exactly as TokenizerGen measures it. Prints the machine with the figures.

    .venv/bin/python benchmarks/tokenizer_bytes_per_token.py [--vocab-size 2000] [--model-types unigram,bpe]
        [--sample-bytes N] [--no-bytes]
"""

import argparse
import dataclasses
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._machine import describe  # noqa: E402
from components.tokenizer import stage  # noqa: E402
from components.config import DataConfig  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vocab-size", type=int, default=2000)
    parser.add_argument("--model-types", default="unigram,bpe")
    parser.add_argument("--sample-bytes", type=int, default=DataConfig.tokenizer_sample_bytes)
    parser.add_argument("--no-bytes", action="store_true", help="skip the byte tokenizer")
    args = parser.parse_args()
    print(describe())
    base = DataConfig(tokenizer_sample_bytes=args.sample_bytes)
    print(f"corpus {base.input} (exclude {', '.join(base.exclude)}), sample budget "
          f"{base.tokenizer_sample_bytes} bytes per split")
    runs = [dataclasses.replace(base, tokenizer="bytes")] * (not args.no_bytes) + [
        dataclasses.replace(base, tokenizer="sentencepiece", vocab_size=args.vocab_size,
                            tokenizer_model_type=t) for t in args.model_types.split(",")]
    for data in runs:
        with tempfile.TemporaryDirectory() as out:
            start = time.monotonic()
            _, f = stage.build_tokenizer(data, out)
            wall = time.monotonic() - start
        name = data.tokenizer if data.tokenizer == "bytes" else f"sentencepiece {data.tokenizer_model_type}"
        print(f"{name:24s} vocab {f['vocab_size']:5d}  bytes/token {f['bytes_per_token']:.3f} "
              f"(eval sample {f['eval_sample_bytes']} bytes, {f['eval_sample_documents']} docs, "
              f"{f['eval_sample_tokens']} tokens)  train sample {f['sample_bytes']} bytes / "
              f"{f['sample_documents']} docs  training {f['training_seconds']:.1f} s, stage "
              f"{wall:.1f} s")


if __name__ == "__main__":
    main()
