"""Every product function reads on one screen: none longer than 60 lines (docs/layout.md,
"How to add a module", rule 1).

Scans the product packages (not tests/ or benchmarks/) with `ast`, nested functions and methods
included, decorators excluded. Fails naming each function over the limit, e.g. when someone grows
`validate` back past 60 lines. No allow-list: split the function instead."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PRODUCT = ("components", "pipeline", "runners", "schemas")
MAX_LINES = 60


def long_functions(root: pathlib.Path = ROOT, max_lines: int = MAX_LINES) -> list[str]:
    found = []
    for package in PRODUCT:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > max_lines:
                        found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_product_function_is_longer_than_one_screen():
    assert long_functions() == []


def test_the_scan_sees_a_long_function(tmp_path):
    """The scan itself can fail: a 61-line function in a product package is reported."""
    package = tmp_path / "components"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(60))
    (package / "long.py").write_text(f"def too_long():\n{body}\n", encoding="utf-8")
    (package / "short.py").write_text("def fine():\n    return 1\n", encoding="utf-8")
    assert long_functions(tmp_path) == ["components/long.py:1 too_long (61 lines)"]
