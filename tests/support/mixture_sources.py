"""Small mixtures of sources for the data stage, and the reference counts and digests their tests
compare against."""

import glob
import gzip
import hashlib
import json
import math
import os
import random

from ml_metadata.proto import metadata_store_pb2 as pb

from benchmarks.support.lineage_store import Builder, _context
from components import config as config_lib


WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
         "sigma tau upsilon phi chi psi omega river stone cloud lamp paper window").split()


PARAMS = dict(seq_len=64, eval_fraction=0.25, split_salt="", train_shards=3, eval_shards=2)


def _paragraph(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(15, 60)))


def make_sources(root: str) -> dict[str, str]:
    """Source `a`: 30 text files of three paragraphs, one exact copy and one empty file; source
    `b`: two JSONL files (70 records, one invalid line, one record repeating a file of `a`).
    Seeded: the same bytes on every machine. Returns {source: its directory}."""
    rng = random.Random(30)
    a, b = os.path.join(root, "a"), os.path.join(root, "b")
    os.makedirs(a)
    os.makedirs(b)
    texts = []
    for i in range(30):
        texts.append("\n\n".join(_paragraph(rng) for _ in range(3)) + "\n")
        with open(os.path.join(a, f"doc_{i:02d}.txt"), "w", encoding="utf-8") as fh:
            fh.write(texts[-1])
    with open(os.path.join(a, "doc_99_copy.txt"), "w", encoding="utf-8") as fh:
        fh.write(texts[3])
    open(os.path.join(a, "empty.txt"), "w").close()
    for part, count in (("part-0.jsonl", 40), ("part-1.jsonl", 30)):
        with open(os.path.join(b, part), "w", encoding="utf-8") as fh:
            for j in range(count):
                fh.write(json.dumps({"text": _paragraph(rng), "id": j}) + "\n")
            if part == "part-0.jsonl":
                fh.write("{not json\n")
                fh.write(json.dumps({"text": texts[5]}) + "\n")
    return {"a": a, "b": b}


def documents_of(source: str, directory: str):
    """(text bytes, input bytes) of every well-formed document, in reading order."""
    for path in sorted(glob.glob(os.path.join(directory, "*"))):
        raw = open(path, "rb").read()
        if source == "a":
            if raw:
                yield raw, len(raw)
            continue
        for line in raw.split(b"\n"):
            try:
                yield json.loads(line)["text"].encode("utf-8"), len(line)
            except ValueError:
                continue


def reference_counts(corpus, weights: dict[str, float], min_words: dict[str, int] | None = None
                     ) -> dict[str, dict]:
    """min_words: {source: the word_count filter's minimum} for sources screened by it (after
    exact dedup, before the split and the weight)."""
    seen, table = set(), {}
    for source in ("a", "b"):
        row = table[source] = {m: {"train": 0, "eval": 0} for m in ("documents", "bytes", "tokens",
                                                                   "unique", "sampled_out")}
        for text, size in documents_of(source, corpus[source]):
            key = hashlib.sha256(text.replace(b"\r\n", b"\n").strip()).hexdigest()
            if key in seen:
                continue                                  # exact dedup, across sources too
            seen.add(key)
            if len(text.split()) < (min_words or {}).get(source, 0):
                continue                                  # filter word_count
            u = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2.0 ** 64
            split = "eval" if u < PARAMS["eval_fraction"] else "train"
            whole = math.floor(weights[source])
            pick = int.from_bytes(hashlib.sha256(f"{key}\0{source}\0{whole}".encode()).digest()[:8],
                                  "big") / 2.0 ** 64
            copies = whole + (pick < weights[source] - whole)
            copies = min(copies, 1) if split == "eval" else copies
            if not copies:
                row["sampled_out"][split] += 1
                continue
            for measure, value in (("documents", copies), ("bytes", copies * size),
                                   ("tokens", copies * len(text)), ("unique", 1)):
                row[measure][split] += value
    return table


def shard_digests(out_dir: str) -> dict[str, str]:
    """sha256 of every output file's decompressed bytes (zlib versions may deflate differently)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(out_dir, "**", "*"), recursive=True)):
        if os.path.isfile(path):
            data = open(path, "rb").read()
            data = gzip.decompress(data) if path.endswith(".gz") else data
            out[os.path.relpath(path, out_dir)] = hashlib.sha256(data).hexdigest()
    return out


WEIGHTS = {"a": 2.5, "b": 0.3}


def _pushed_run(b: Builder, run_id: str, version: int, examples: pb.Artifact, extra: dict,
                base_model=None) -> int:
    run = _context(b.store, b.types, "pipeline_run", run_id)
    done = pb.Execution.COMPLETE
    made = b.artifact("Examples", "examples", extra, run_id)
    made.uri = examples.uri
    for key, value in examples.custom_properties.items():
        made.custom_properties[key].CopyFrom(value)
    examples_id = b.execution(run, "TextExampleGen", done, {}, {"examples": made},
                              {"data_config": json.dumps({"dedup": "exact"})})["examples"]
    inputs = {"examples": [examples_id]} | ({"base_model": [base_model]} if base_model else {})
    model = b.execution(run, "Trainer", done, inputs, {"model": b.artifact(
        "Model", "model", {"steps": 10}, run_id)})["model"]
    dest = os.path.join(b.root, "serving", "gpt", str(version))
    os.makedirs(dest)
    b.execution(run, "Pusher", done, {"model": [model]}, {"pushed_model": b.artifact(
        "PushedModel", "pushed", {"pushed": 1, "pushed_version": str(version),
                                  "pushed_destination": dest}, run_id)})
    return model


def plant(corpus: dict[str, str], root: str) -> str:
    """Near copies (a few words changed) of two files of source a, a file that repeats one line
    (filter duplicate_lines) and an evaluation file sharing 20 words with a record of source b.
    Returns the evaluation file."""
    a, rng = corpus["a"], random.Random(7)
    for k in (1, 2):
        words = open(os.path.join(a, f"doc_{k:02d}.txt"), encoding="utf-8").read().split(" ")
        for i in rng.sample(range(len(words)), 3):
            words[i] = "changed"
        with open(os.path.join(a, f"near_{k:02d}.txt"), "w", encoding="utf-8") as fh:
            fh.write(" ".join(words))
    with open(os.path.join(a, "repeats.txt"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(["the same line again and again and again"] * 40) + "\n")
    record = open(os.path.join(corpus["b"], "part-1.jsonl"), encoding="utf-8").readline()
    eval_file = os.path.join(root, "eval_set.txt")
    with open(eval_file, "w", encoding="utf-8") as fh:
        fh.write(" ".join(json.loads(record)["text"].split()[:20]) + "\n")
    return eval_file


def cleaning_data(corpus: dict[str, str], eval_file: str) -> config_lib.DataConfig:
    return config_lib.DataConfig(
        sources=(config_lib.SourceConfig(name="a", input=corpus["a"], weight=WEIGHTS["a"]),
                 config_lib.SourceConfig(name="b", input=corpus["b"], format="jsonl",
                                         weight=WEIGHTS["b"], filters=("word_count",))),
        dedup="near", near_dedup=config_lib.NearDedupConfig(threshold=0.7),
        filters=config_lib.QualityFilterConfig(enabled=("word_count", "duplicate_lines"),
                                               min_words=20),
        decontaminate=config_lib.DecontaminationConfig(eval_files=(eval_file,)),
        seq_len=64, eval_fraction=0.25, train_shards=3, eval_shards=2)
