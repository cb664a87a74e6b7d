"""Issue 57 (10): the code tasks' items are a function of the set and eval.task_seed alone. Items
keyed by Python's hash() (random per process: PYTHONHASHSEED) passed every test, since each test
built its items in one process. Here two fresh interpreters with different hash seeds build the
items of the same texts and must agree byte for byte, and a third seed of the task changes them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXTS = [("def f%d(x):\n    y = x * %d + 1\n    return y - %d\n\nclass K%d:\n    value = %d\n"
          % (i, i, i, i, i)).encode() for i in range(12)]
_CHILD = """
import json, sys
from components.evaluation.tasks import build_items
texts = [t.encode("latin-1") for t in json.load(sys.stdin)]
items = build_items(texts, count=8, seed=int(sys.argv[1]), max_line_bytes=40)
print(json.dumps([[i.key.hex(), i.prompt.decode("latin-1"), i.target.decode("latin-1"),
                   [o.decode("latin-1") for o in i.options], i.answer] for i in items]))
"""


def _items_in_a_fresh_process(hash_seed: str, task_seed: int = 0) -> list:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", _CHILD, str(task_seed)], cwd=ROOT, env=env,
                          input=json.dumps([t.decode("latin-1") for t in TEXTS]),
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def test_two_processes_build_the_same_items_and_the_task_seed_moves_them():
    first, second = _items_in_a_fresh_process("1"), _items_in_a_fresh_process("2")
    assert len(first) == 8 and first == second
    assert {row[2] for row in first} <= {line.strip() for t in TEXTS
                                         for line in t.decode().splitlines()}
    assert _items_in_a_fresh_process("1", task_seed=1) != first
