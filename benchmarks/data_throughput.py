"""Data stage throughput and peak memory vs a plain single-process converter, side by side.

Builds a corpus of about --size-mb MB from the standard library (copies under distinct paths) in a
temporary directory: with --format text (the default) one file per stdlib file; with --format
jsonl one JSONL file per copy of the stdlib, a record {"text": <file text>} per line (read by
data.format=jsonl in 16 MB byte ranges). Then runs, each in its own process (memory polled from
/proc every 0.1 s: the peak of the whole process tree, of the largest single process, of the
driver (the run's own process) and of the largest other (a Beam worker), and the most processes
at once):
  baseline     a plain loop written here: read each file (jsonl: each line, json.loads, the text
               encoded), byte ids, pack (the same packing rule), build tf.train.Example in
               Python, write 4 gzip TFRecord shards round-robin;
  stage        the data stage's Beam pipeline (TextToTFRecordShards, default data config:
               dedup=exact) with the DirectRunner, 2 worker processes (multi_processing);
  stage-1proc  the same with the DirectRunner in_memory (one process);
  stage-none   the stage with data.dedup=none (the same work as the baseline), 2 workers;
               stage-none-1proc: in_memory;
  single-file  (text only) the same corpus as ONE text file, data.document=separator (blank
               lines), read in byte ranges by 2 workers;
  stage-decon  the stage with data.dedup=none decontaminating against the default eval.sets
               (components/config/heldout.py DEFAULT_SETS: the data stage's default screen),
               2 workers; stage-decon-1proc: in_memory. Beside stage-none(-1proc) (eval.sets=[])
               the ratio on/off is printed;
  stage-near   the stage with data.dedup=near (exact, then MinHash LSH near duplicates: two more
               reads of the input), 2 worker processes; stage-near-1proc: in_memory.
  stage-dask   the stage (dedup=exact) on Beam's DaskRunner, on the Dask cluster at --dask-address
               (`make dask`: a scheduler and 2 worker processes on this machine); its CPU s add
               the workers' own (user + system, read in each worker before and after);
               stage-none-dask: dedup=none.
CPU s = user + system seconds of the conversion in the run's process and the worker processes
it waited for (getrusage); on a shared machine it varies less than the wall time.
--near-copies prepends a line naming the copy to every file of every copy after the first, so
the copies are near duplicates instead of exact ones (exact dedup keeps them all; near dedup
signs every document and removes them). --distinct-copies makes every copy different text of
the same size and byte mix instead (copy k: its ASCII letters through an affine cipher of its
own), a corpus without exact or near copies: every pass of every run reads, signs and packs all
of it (the case of a held-out corpus).
MB/s = corpus bytes / seconds of the conversion itself (interpreter and library imports excluded,
they are the same for every run). The temporary corpus and outputs are removed at the end.

    .venv/bin/python benchmarks/data_throughput.py [--size-mb 1024] [--format jsonl]
        [--runs baseline,stage-none,stage-none-1proc,stage-near,...]
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _machine import cpu_seconds  # noqa: E402

RUNS = ("baseline", "stage", "stage-1proc", "stage-none", "stage-none-1proc", "single-file",
        "stage-near", "stage-near-1proc", "stage-decon", "stage-decon-1proc", "stage-dask",
        "stage-none-dask")
# --decon: these runs, alternated (off, on, off, on, ...) so each pair sees the same machine load.
DECON_RUNS = ("baseline", "stage-none-1proc", "stage-decon-1proc", "stage-none", "stage-decon")
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


def rotated(data: bytes, copy: int) -> bytes:
    """Copy `copy` of a text: ASCII letters (either case) mapped by x -> (m x + copy) mod 26,
    m = 1, 3, 5, 7, ... for copies 0-25, 26-51, ... (an affine cipher: the same length and byte
    mix; two copies below 312 share almost no word, whatever the case)."""
    multiplier = (1, 3, 5, 7, 9, 11, 15, 17, 19, 21, 23, 25)[(copy // 26) % 12]
    mapped = [(multiplier * x + copy) % 26 for x in range(26)]
    return data.translate(bytes.maketrans(
        bytes(range(97, 123)) + bytes(range(65, 91)),
        bytes(97 + x for x in mapped) + bytes(65 + x for x in mapped)))


def build_corpus(directory: str, size_bytes: int, near_copies: bool = False,
                 fmt: str = "text", distinct_copies: bool = False) -> tuple[str, str | None, int]:
    """(files dir, single file path or None, bytes): copies of the stdlib until size_bytes is
    reached; near_copies: each copy after the first starts with a line naming it. fmt text: one
    file per stdlib file, and the same text as one file; jsonl: one JSONL file per copy, a
    {"text": ...} record per stdlib file (bytes: the JSONL bytes)."""
    root = sysconfig.get_paths()["stdlib"]
    files_dir = os.path.join(directory, "files")
    single = os.path.join(directory, "single", "corpus.txt") if fmt == "text" else None
    sources = [(os.path.relpath(p, root), open(p, "rb").read()) for p in stdlib_files()]
    total, copy = 0, 0
    joined = None
    if single:
        os.makedirs(os.path.dirname(single))
        joined = open(single, "wb")
    while total < size_bytes:
        jsonl = None
        if fmt == "jsonl":
            os.makedirs(files_dir, exist_ok=True)
            jsonl = open(os.path.join(files_dir, f"copy{copy:03d}.jsonl"), "wb")
        for relative, original in sources:
            data = f"# copy {copy}\n".encode() + original if near_copies and copy else original
            data = rotated(data, copy) if distinct_copies else data
            if jsonl is not None:
                line = json.dumps({"text": data.decode("utf-8", "replace")}).encode() + b"\n"
                jsonl.write(line)
                total += len(line)
            else:
                path = os.path.join(files_dir, f"copy{copy:03d}", relative)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as fh:
                    fh.write(data)
                joined.write(data + b"\n\n")
                total += len(data)
            if total >= size_bytes:
                break
        if jsonl is not None:
            jsonl.close()
        copy += 1
    if joined is not None:
        joined.close()
    return files_dir, single, total


# ----------------------------------------------------------------------------------------------
# The runs (child processes).


def baseline_texts(files, fmt: str):
    """The texts of the plain converter: each file whole (text), each line's `text` field
    (jsonl); undecodable input skipped."""
    for _, path in files:
        if fmt == "jsonl":
            with open(path, "rb") as fh:
                for line in fh:
                    try:
                        yield json.loads(line)["text"].encode("utf-8")
                    except (ValueError, KeyError, TypeError, UnicodeEncodeError):
                        continue
            continue
        data = open(path, "rb").read()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        yield data


def run_baseline(corpus: str, out: str, fmt: str = "text") -> None:
    """The plain converter: one process, one document at a time, Python tf.train.Example."""
    import numpy as np
    import tensorflow as tf

    from components.storage import listing
    from schemas import FEATURE
    from components.tokenizer.byte_level import BOS_ID, EOS_ID, PAD_ID
    seq_len = 128
    _, files = listing.list_input_files(corpus)
    os.makedirs(out)
    start, cpu = time.perf_counter(), cpu_seconds()
    writers = [tf.io.TFRecordWriter(os.path.join(out, f"shard-{i}.gz"), options="GZIP")
               for i in range(4)]
    stream, written = np.empty(0, np.int64), 0

    def write(window):
        nonlocal written
        example = tf.train.Example()
        example.features.feature[FEATURE].int64_list.value.extend(window.tolist())
        writers[written % 4].write(example.SerializeToString())
        written += 1

    for data in baseline_texts(files, fmt):
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
    print(json.dumps({"seconds": time.perf_counter() - start, "cpu_seconds": cpu_seconds() - cpu,
                      "sequences": written}))


def run_stage(corpus: str, out: str, beam_args: list[str], document: str,
              dedup: str = "exact", fmt: str = "text", decon: bool = False) -> None:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from components.storage import listing
    from components.corpus import readers
    from components.corpus.split_documents import reader_config
    from components.text_example_gen import component, transforms
    from components.config import DataConfig
    from components.corpus import minhash
    from components.config import DecontaminationConfig
    from components.config.heldout import DEFAULT_SETS
    from components.corpus.screen import screen_for
    eval_files = tuple(s.input for s in DEFAULT_SETS) if decon else ()
    data = DataConfig(input=corpus, format=fmt, document=document, dedup=dedup,
                      decontaminate=DecontaminationConfig(eval_files=eval_files))
    workers = os.environ.get("BENCH_DASK_ADDRESS") if "--runner=" in " ".join(beam_args) else None
    workers_cpu = dask_workers_cpu(workers)
    start, cpu = time.perf_counter(), cpu_seconds()
    _, files = listing.list_input_files(corpus)
    pipeline = beam.Pipeline(options=PipelineOptions(beam_args))
    stage = transforms.TextToTFRecordShards(
        files, out, reader_config=reader_config(data), seq_len=data.seq_len,
        eval_fraction=data.eval_fraction, split_salt=data.split_salt,
        train_shards=data.train_shards, eval_shards=data.eval_shards,
        gzip_level=int(os.environ.get("BENCH_GZIP_LEVEL", data.gzip_level)), dedup=data.dedup,
        near_dedup=minhash.params_of(data.near_dedup), screen=screen_for(data))
    _ = pipeline | stage
    pipeline.run().wait_until_finish()
    seconds = time.perf_counter() - start
    cpu = cpu_seconds() - cpu + dask_workers_cpu(workers) - workers_cpu
    counters = component.stage_counters(out, units=stage.units)
    component.check_accounting(counters, len(files), "quarantine.jsonl")
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu,
                      "sequences": counters["sequences_train"] + counters["sequences_eval"],
                      "units": len(readers.plan_units(files, reader_config(data))),
                      "skipped": {k: v for k, v in counters.items()
                                  if k.startswith("documents_skipped_") and v}}))


# ----------------------------------------------------------------------------------------------
# Measuring a child process tree.


def tree_rss_bytes(pid: int) -> dict[int, int]:
    """Resident memory of pid and each of its descendants (from /proc), by pid."""
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
    tree, todo = {}, [pid]
    while todo:
        current = todo.pop()
        if current in rss:
            tree[current] = rss[current]
        todo += children.get(current, [])
    return tree


def measure(argv: list[str]) -> dict:
    """Run one child; its result with the peaks of memory: the whole tree's, each process's
    (the driver's, the largest other's: a Beam worker or the shell that starts it) and the
    most processes at once."""
    process = subprocess.Popen([sys.executable, os.path.abspath(__file__), *argv],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = {"tree": 0, "processes": 0, "by_pid": {}}

    def poll():
        while process.poll() is None:
            tree = tree_rss_bytes(process.pid)
            peak["tree"] = max(peak["tree"], sum(tree.values()))
            peak["processes"] = max(peak["processes"], len(tree))
            for pid, rss in tree.items():
                peak["by_pid"][pid] = max(peak["by_pid"].get(pid, 0), rss)
            time.sleep(0.1)
    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    stdout, stderr = process.communicate()
    watcher.join()
    if process.returncode != 0:
        raise RuntimeError(f"{argv[1]} failed:\n{stderr[-3000:]}")
    result = json.loads(stdout.strip().splitlines()[-1])
    others = [rss for pid, rss in peak["by_pid"].items() if pid != process.pid]
    result.update(peak_rss_bytes=peak["tree"], processes=peak["processes"],
                  peak_process_rss_bytes=max(peak["by_pid"].values(), default=0),
                  peak_driver_rss_bytes=peak["by_pid"].get(process.pid, 0),
                  peak_worker_rss_bytes=max(others, default=0))
    return result


def dask_workers_cpu(address: str | None) -> float:
    """User + system seconds of the Dask cluster's worker processes so far (0 without one)."""
    if not address:
        return 0.0
    from distributed import Client
    with Client(address, timeout=10) as client:
        return sum(client.run(lambda: sum(os.times()[:2])).values())


def child(run: str, corpus: str, out: str, fmt: str) -> None:
    if run == "baseline":
        run_baseline(corpus, out, fmt)
        return
    dedup = ("near" if run.startswith("stage-near") else "none"
             if run.startswith(("stage-none", "stage-decon")) else "exact")
    document = "separator" if run == "single-file" else "record" if fmt == "jsonl" else "file"
    args = (ONE_PROCESS if run.endswith("1proc") else ONE_PROCESS + [
        "--runner=DaskRunner", f"--dask_client_address={os.environ['BENCH_DASK_ADDRESS']}"]
        if run.endswith("-dask") else TWO_WORKERS)
    from components.config.beam_placement import resolved_args
    run_stage(corpus, out, resolved_args(args), document, dedup, fmt,
              decon=run.startswith("stage-decon"))


def report(run: str, r: dict, results: dict) -> str:
    ratio = (f"{r['mb_per_s'] / results['baseline']['mb_per_s']:5.2f}x"
             if "baseline" in results and run != "baseline" else "     ")
    return (f"{run:<17} {r['seconds']:7.1f} s {r['cpu_seconds']:7.1f} CPU-s "
            f"{r['mb_per_s']:6.2f} MiB/s {ratio}  peak RSS tree {r['peak_rss_bytes'] / 2**30:5.2f} "
            f"GiB, largest process {r['peak_process_rss_bytes'] / 2**30:5.2f} GiB of "
            f"{r['processes']} (driver {r['peak_driver_rss_bytes'] / 2**30:.2f}, largest other "
            f"{r['peak_worker_rss_bytes'] / 2**30:.2f})  {r['sequences']} sequences, "
            f"{r['out_bytes'] / 2**20:.0f} MiB of shards {r.get('skipped', '')}")


def measure_run(run: str, corpus: str, out: str, fmt: str, total: int) -> dict:
    """One run in its own process: its result with its output's size and MiB/s."""
    r = measure(["--child", run, corpus, out, fmt])
    r["out_bytes"] = sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(out)
                         for n in names)
    r["mb_per_s"] = total / 2**20 / r["seconds"]
    shutil.rmtree(out, ignore_errors=True)
    return r


def decon_summary(results: dict[str, list[dict]]) -> str:
    """The median ratio decontamination on / off (wall and CPU-s) over the rounds, one process
    and 2 workers, each on run beside the off run of its own round."""
    lines = []
    for on, off in (("stage-decon-1proc", "stage-none-1proc"), ("stage-decon", "stage-none")):
        for measure_name in ("seconds", "cpu_seconds"):
            ratios = sorted(a[measure_name] / b[measure_name]
                            for a, b in zip(results[on], results[off]))
            lines.append(f"{on} / {off} {measure_name}: median {ratios[len(ratios) // 2]:.3f} "
                         f"(rounds: {', '.join(f'{x:.3f}' for x in ratios)})")
    skipped = {run: results[run][-1].get("skipped") for run in ("stage-decon-1proc", "stage-decon")}
    return "\n".join(lines + [f"documents skipped: {skipped}"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--format", choices=("text", "jsonl"), default="text")
    parser.add_argument("--runs", default=None, help=f"comma-separated, of {RUNS} (default: all; "
                        "single-file only with --format text)")
    parser.add_argument("--gzip-level", type=int, help="data.gzip_level of the stage runs "
                                                      "(default: the config default)")
    parser.add_argument("--near-copies", action="store_true", help="copies after the first "
                        "start with a line naming the copy: near, not exact, duplicates")
    parser.add_argument("--distinct-copies", action="store_true", help="copy k has its ASCII "
                        "letters through an affine cipher of its own: no exact or near "
                        "duplicates across copies")
    parser.add_argument("--dask-address", help="the Dask scheduler of the -dask runs, e.g. "
                        "tcp://127.0.0.1:28786 (`make dask`; default: $BIGTRAIN_DASK_ADDRESS)")
    parser.add_argument("--decon", type=int, metavar="ROUNDS", help="the cost of "
                        "decontamination: ROUNDS rounds of baseline and stage-none / stage-decon "
                        "(one process, then 2 workers) back to back; prints each round and the "
                        "median ratio on/off")
    parser.add_argument("--child", nargs=4, metavar=("RUN", "CORPUS", "OUT", "FORMAT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        child(*args.child)
        return 0

    from benchmarks._machine import describe
    from components.config import DataConfig
    if args.gzip_level:
        os.environ["BENCH_GZIP_LEVEL"] = str(args.gzip_level)
    address = args.dask_address or os.environ.get("BIGTRAIN_DASK_ADDRESS")
    if address:
        os.environ["BENCH_DASK_ADDRESS"] = address
    level = args.gzip_level or DataConfig().gzip_level
    runs = [r for r in (args.runs or ",".join(RUNS)).split(",")
            if r and not (r == "single-file" and args.format == "jsonl" and args.runs is None)
            and not (r.endswith("-dask") and not address and args.runs is None)]
    if any(r.endswith("-dask") for r in runs) and not address:
        parser.error("a -dask run needs --dask-address (or $BIGTRAIN_DASK_ADDRESS; `make dask`)")
    if args.decon:
        runs = list(DECON_RUNS) * args.decon
    if args.format == "jsonl" and "single-file" in runs:
        parser.error("single-file is a --format text run")
    work = tempfile.mkdtemp(prefix="bigtrain-data-bench-")
    try:
        files_dir, single, total = build_corpus(work, args.size_mb * 2**20, args.near_copies,
                                                args.format, args.distinct_copies)
        count = sum(len(names) for _, _, names in os.walk(files_dir))
        print(f"machine: {describe()}")
        print(f"load average at start: {os.getloadavg()}")
        print(f"corpus: {total / 2**20:.0f} MiB, {count} {args.format} files (stdlib copies"
              f"{', near copies' if args.near_copies else ''}"
              f"{', distinct copies (letters enciphered)' if args.distinct_copies else ''})"
              f"{' and the same text as one file' if single else ''}; seq_len 128, 4 train "
              f"shards; gzip level: baseline 6 (TF default), stage {level} (data.gzip_level)",
              flush=True)
        results: dict[str, list[dict]] = {}
        for run in runs:
            corpus = os.path.dirname(single) if run == "single-file" else files_dir
            r = measure_run(run, corpus, os.path.join(work, f"out-{run}"), args.format, total)
            results.setdefault(run, []).append(r)
            print(report(run, r, {k: v[-1] for k, v in results.items()}), flush=True)
        if args.decon:
            print(decon_summary(results))
        print(f"load average at end: {os.getloadavg()}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
