"""TokenizerGen's sample read: a single-process reference read (corpus readers + the sample rule in one
loop) vs the Beam read (components/tokenizer/sample_pipeline.py) in memory and with N worker
processes, side by side on one input. Checks the samples are equal. Tiny by default.

    .venv/bin/python benchmarks/tokenizer_sample_read.py [--input DIR] [--workers 2]
        [--document separator]   (large text files, read in 8 MiB ranges)
"""

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._machine import describe  # noqa: E402
from components.config import DataConfig  # noqa: E402
from benchmarks.support.single_process import read_split_documents  # noqa: E402
from components.tokenizer import sample_pipeline, sampling  # noqa: E402


def old_read(data):
    """The reference: one process, every document through one sampler per split."""
    accumulators = {s: sampling.SampleAccumulator(data.tokenizer_sample_bytes) for s in ("train", "eval")}
    for ordinal, (split, document) in enumerate(read_split_documents(data)):
        accumulators[split].add(sampling.candidate(document.id, document.text, (0, ordinal)))
    return {s: a.sample().texts for s, a in accumulators.items()}


def beam_read(data, args):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    out = tempfile.mkdtemp(prefix="sample-bench-")
    try:
        samples, _ = sample_pipeline.read_samples(
            data, out, lambda: beam.Pipeline(options=PipelineOptions(args)))
    finally:
        shutil.rmtree(out)
    return {s: sample.texts for s, sample in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", default="<stdlib>/email")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sample-bytes", type=int, default=200_000)
    parser.add_argument("--document", default="file", help="data.document: file | separator")
    args = parser.parse_args()
    print(describe())
    data = dataclasses.replace(DataConfig(input=args.input, exclude=(), eval_fraction=0.1),
                               tokenizer_sample_bytes=args.sample_bytes, range_bytes=8 << 20,
                               document=args.document)
    from components.storage.listing import list_input_files, regular_size
    total = sum(regular_size(p) or 0 for _, p in list_input_files(data.input, data.exclude)[1])
    runs = [("single process (old)", lambda: old_read(data)),
            ("Beam, in memory", lambda: beam_read(data, ["--direct_running_mode=in_memory",
                                                         "--direct_num_workers=1"])),
            (f"Beam, {args.workers} processes", lambda: beam_read(data, [
                "--direct_running_mode=multi_processing", f"--direct_num_workers={args.workers}"]))]
    reference = None
    for name, run in runs:
        started = time.monotonic()
        texts = run()
        seconds = time.monotonic() - started
        reference = reference or texts
        print(f"{name:24s} {seconds:7.2f} s  {total / seconds / 1e6:6.2f} MB/s of input "
              f"({total / 1e6:.1f} MB)  sample equal: {texts == reference}")


if __name__ == "__main__":
    main()
