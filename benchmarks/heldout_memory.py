"""Choosing a held-out set's documents from a 200 MB set file with max_bytes 1000 (issue 57): peak
resident memory and seconds of `set_documents` (components/evaluation/held_out_sets.py), each
measurement in its own child process (its peak RSS is the child's own ru_maxrss, from os.wait4),
byte tokenizer, eval.max_document_bytes at its default.

Two set files of the same size, written once in a temporary directory (not timed) and removed at
the end: `text`, one plain-text file (one document, the issue's case) and `jsonl`, one record per
line of ~2 KB each (many documents, every one read and keyed).

    .venv/bin/python benchmarks/heldout_memory.py [--mb 200] [--source DIR]

--source: the source tree the child imports (default: this checkout); how the figure before the
change was measured, on an unchanged copy of the commit before it (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._machine import describe  # noqa: E402

CHILD = """
import json, sys, time
from components.config import EvalConfig
from components.config.heldout import HeldOutSetConfig
from components.evaluation.held_out_sets import set_documents
from components.tokenizer.byte_level import ByteTokenizer
started = time.perf_counter()
held_out = HeldOutSetConfig(name="big", input=sys.argv[1], max_bytes=1000)
max_document_bytes = EvalConfig().max_document_bytes
found = set_documents(held_out, ByteTokenizer(), max_document_bytes)
chosen, note = getattr(found, "documents", found), ""   # a list before the change
if not chosen and hasattr(found, "documents"):
    from components.evaluation.held_out_sets import no_document_problem
    note = no_document_problem(held_out, found, max_document_bytes)
print(json.dumps({"seconds": time.perf_counter() - started, "chosen": len(chosen), "note": note}))
"""


def write_sets(folder: str, mb: int) -> dict[str, str]:
    """{kind: path} of the two set files, ~mb MB each."""
    line = ("def f(x):\n    return x * 2  # a line of code\n" * 45)[:2000]
    text = os.path.join(folder, "big.txt")
    with open(text, "w") as fh:
        for i in range(mb * 500):
            fh.write(f"{i:07d} {line}")
    jsonl = os.path.join(folder, "big.jsonl")
    with open(jsonl, "w") as fh:
        for i in range(mb * 500):
            fh.write(json.dumps({"text": f"{i:07d} {line}"[:1900]}) + "\n")
    return {"text": text, "jsonl": jsonl}


def measure(source: str, path: str) -> dict:
    """The child's figures, plus its peak RSS (MiB) as the kernel counted it."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, path], cwd=source,
                             env=dict(os.environ, PYTHONPATH=source), stdout=subprocess.PIPE)
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise RuntimeError(f"the child exited {child.returncode} on {path}")
    return dict(json.loads(out), peak_mib=usage.ru_maxrss / 1024)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args()
    print(f"machine: {describe()}\nsource: {args.source}")
    folder = tempfile.mkdtemp(prefix="heldout-memory-")
    try:
        files = write_sets(folder, args.mb)
        for kind, path in files.items():
            m = measure(args.source, path)
            print(f"  {kind:<6} {os.path.getsize(path) / 1e6:6.0f} MB: {m['seconds']:7.2f} s, "
                  f"peak RSS {m['peak_mib']:8.0f} MiB, {m['chosen']} chosen {m['note']}",
                  flush=True)
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
