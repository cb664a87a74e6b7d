"""Data stage throughput and peak memory vs a plain single-process converter, side by side.

Builds a corpus of about --size-mb MB from the standard library (copies under distinct paths) in a
temporary directory, then runs, each in its own process (peak RSS = the whole process tree,
polled from /proc every 0.1 s):
  baseline     a plain loop written here: read each file, byte ids, pack (the same packing rule),
               build tf.train.Example in Python, write 4 gzip TFRecord shards round-robin;
  stage        the data stage's Beam pipeline (TextToTFRecordShards, default data config) with
               the DirectRunner, 2 worker processes (multi_processing);
  stage-1proc  the same with the DirectRunner in_memory (one process);
  single-file  the same corpus as ONE text file, data.document=separator (blank lines), read in
               byte ranges by 2 workers;
  stage-near   the stage with data.dedup=near (exact, then MinHash LSH near duplicates: two more
               reads of the input), 2 worker processes; stage-near-1proc: in_memory.
--near-copies prepends a line naming the copy to every file of every copy after the first, so
the copies are near duplicates instead of exact ones (exact dedup keeps them all; near dedup
signs every document and removes them).
MB/s = corpus bytes / seconds of the conversion itself (interpreter and library imports excluded,
they are the same for every run). The temporary corpus and outputs are removed at the end.

    .venv/bin/python benchmarks/data_throughput.py [--size-mb 1024] [--runs baseline,stage,...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

RUNS = ("baseline", "stage", "stage-1proc", "single-file", "stage-near", "stage-near-1proc")
TWO_WORKERS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
ONE_PROCESS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


# ----------------------------------------------------------------------------------------------
# Corpus.


def stdlib_files() -> list[str]:
    root = sysconfig.get_paths()["stdlib"]
    out = []
    for dirpath, dirnames, names in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "dist-packages",
                                                                "__pycache__"))
        out += [os.path.join(dirpath, n) for n in sorted(names) if n.endswith(".py")]
    return out


def build_corpus(directory: str, size_bytes: int, near_copies: bool = False) -> tuple[str, str, int]:
    """(files dir, single file path, bytes): copies of the stdlib until size_bytes is reached;
    near_copies: each copy after the first starts with a line naming it."""
    root = sysconfig.get_paths()["stdlib"]
    files_dir = os.path.join(directory, "files")
    single = os.path.join(directory, "single", "corpus.txt")
    os.makedirs(os.path.dirname(single))
    sources = [(os.path.relpath(p, root), open(p, "rb").read()) for p in stdlib_files()]
    total, copy = 0, 0
    with open(single, "wb") as joined:
        while total < size_bytes:
            for relative, original in sources:
                path = os.path.join(files_dir, f"copy{copy:03d}", relative)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                data = f"# copy {copy}\n".encode() + original if near_copies and copy else original
                with open(path, "wb") as fh:
                    fh.write(data)
                joined.write(data + b"\n\n")
                total += len(data)
                if total >= size_bytes:
                    break
            copy += 1
    return files_dir, single, total


# ----------------------------------------------------------------------------------------------
# The runs (child processes).


def run_baseline(corpus: str, out: str) -> None:
    """The plain converter: one process, one file at a time, Python tf.train.Example."""
    import numpy as np
    import tensorflow as tf

    from components.common import listing
    from schemas import FEATURE
    from components.tokenizer.byte_level import BOS_ID, EOS_ID, PAD_ID
    seq_len = 128
    _, files = listing.list_input_files(corpus)
    os.makedirs(out)
    start = time.perf_counter()
    writers = [tf.io.TFRecordWriter(os.path.join(out, f"shard-{i}.gz"), options="GZIP")
               for i in range(4)]
    stream, written = np.empty(0, np.int64), 0

    def write(window):
        nonlocal written
        example = tf.train.Example()
        example.features.feature[FEATURE].int64_list.value.extend(window.tolist())
        writers[written % 4].write(example.SerializeToString())
        written += 1

    for _, path in files:
        data = open(path, "rb").read()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        ids = np.frombuffer(data, np.uint8).astype(np.int64)
        stream = np.concatenate([stream, [BOS_ID], ids, [EOS_ID]])
        count = (len(stream) - 1) // seq_len
        for i in range(count):
            write(stream[i * seq_len:i * seq_len + seq_len + 1])
        stream = stream[count * seq_len:]
    if len(stream) > 1:
        write(np.concatenate([stream, np.full(seq_len + 1 - len(stream), PAD_ID)]))
    for writer in writers:
        writer.close()
    print(json.dumps({"seconds": time.perf_counter() - start, "sequences": written}))


def run_stage(corpus: str, out: str, beam_args: list[str], document: str,
              dedup: str = "exact") -> None:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from components.common import listing
    from components.corpus import readers
    from components.corpus.split_documents import reader_config
    from components.text_example_gen import component, transforms
    from components.config import DataConfig
    from components.corpus import minhash
    data = DataConfig(input=corpus, document=document, dedup=dedup)
    start = time.perf_counter()
    _, files = listing.list_input_files(corpus)
    pipeline = beam.Pipeline(options=PipelineOptions(beam_args))
    _ = pipeline | transforms.TextToTFRecordShards(
        files, out, reader_config=reader_config(data), seq_len=data.seq_len,
        eval_fraction=data.eval_fraction, split_salt=data.split_salt,
        train_shards=data.train_shards, eval_shards=data.eval_shards,
        gzip_level=int(os.environ.get("BENCH_GZIP_LEVEL", data.gzip_level)), dedup=data.dedup,
        near_dedup=minhash.params_of(data.near_dedup))
    result = pipeline.run()
    result.wait_until_finish()
    seconds = time.perf_counter() - start
    counters = component.counters_from_metrics(result)
    component.check_accounting(counters, len(files), "quarantine.jsonl")
    print(json.dumps({"seconds": seconds, "sequences": counters["sequences_train"]
                      + counters["sequences_eval"], "units": len(readers.plan_units(
                          files, reader_config(data))),
                      "skipped": {k: v for k, v in counters.items()
                                  if k.startswith("documents_skipped_") and v}}))


# ----------------------------------------------------------------------------------------------
# Measuring a child process tree.


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of pid and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        rss[int(entry)] = int(fields[21]) * page
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        total += rss.get(current, 0)
        todo += children.get(current, [])
    return total


def measure(argv: list[str]) -> dict:
    process = subprocess.Popen([sys.executable, os.path.abspath(__file__), *argv],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0]

    def poll():
        while process.poll() is None:
            peak[0] = max(peak[0], tree_rss_bytes(process.pid))
            time.sleep(0.1)
    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    stdout, stderr = process.communicate()
    watcher.join()
    if process.returncode != 0:
        raise RuntimeError(f"{argv[1]} failed:\n{stderr[-3000:]}")
    result = json.loads(stdout.strip().splitlines()[-1])
    result["peak_rss_bytes"] = peak[0]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated, of {RUNS}")
    parser.add_argument("--gzip-level", type=int, help="data.gzip_level of the stage runs "
                                                      "(default: the config default)")
    parser.add_argument("--near-copies", action="store_true", help="copies after the first "
                        "start with a line naming the copy: near, not exact, duplicates")
    parser.add_argument("--child", nargs=3, metavar=("RUN", "CORPUS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        run, corpus, out = args.child
        if run == "baseline":
            run_baseline(corpus, out)
        else:
            run_stage(corpus, out, ONE_PROCESS if run.endswith("1proc") else TWO_WORKERS,
                      "separator" if run == "single-file" else "file",
                      "near" if run.startswith("stage-near") else "exact")
        return 0

    from benchmarks._machine import describe
    from components.config import DataConfig
    if args.gzip_level:
        os.environ["BENCH_GZIP_LEVEL"] = str(args.gzip_level)
    level = args.gzip_level or DataConfig().gzip_level
    runs = [r for r in args.runs.split(",") if r]
    work = tempfile.mkdtemp(prefix="bigtrain-data-bench-")
    try:
        files_dir, single, total = build_corpus(work, args.size_mb * 2**20, args.near_copies)
        count = sum(len(names) for _, _, names in os.walk(files_dir))
        print(f"machine: {describe()}")
        print(f"corpus: {total / 2**20:.0f} MiB, {count} files (stdlib copies"
              f"{', near copies' if args.near_copies else ''}) and the same text as "
              f"one file; seq_len 128, 4 train shards; gzip level: baseline 6 (TF default), stage "
              f"{level} (data.gzip_level)")
        results = {}
        for run in runs:
            corpus = os.path.dirname(single) if run == "single-file" else files_dir
            out = os.path.join(work, f"out-{run}")
            results[run] = measure(["--child", run, corpus, out])
            r = results[run]
            r["out_bytes"] = sum(os.path.getsize(os.path.join(d, n))
                                 for d, _, names in os.walk(out) for n in names)
            r["mb_per_s"] = total / 2**20 / r["seconds"]
            shutil.rmtree(out, ignore_errors=True)
            ratio = (f"{r['mb_per_s'] / results['baseline']['mb_per_s']:.2f}x baseline"
                     if "baseline" in results and run != "baseline" else "")
            print(f"{run:<12} {r['seconds']:8.1f} s  {r['mb_per_s']:6.2f} MiB/s  peak RSS "
                  f"{r['peak_rss_bytes'] / 2**30:5.2f} GiB  {r['sequences']} sequences, {r['out_bytes'] / 2**20:.0f} MiB of shards  {ratio} {r.get('skipped', '')}",
                  flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
