"""The house's layers, derived from the code: every import (module level or inside a function)
of a bigtrain module points down the layer order, no two packages of one layer import each other,
and no file-level cycle exists. Outside the layers, the same import graph keeps three tiers apart:
the product never imports `benchmarks` or `tests`, and `benchmarks` (shipped beside the product)
never imports `tests`; tests may import both (a fixture they share with a benchmark lives in
`benchmarks/support/`). Run on every test tier, so the layout stays true.

Layers, bottom to top (docs/layout.md has the picture):"""

from __future__ import annotations

import ast
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("schemas", "components", "pipeline", "runners")
# Layer of each package prefix (the longest matching prefix wins). A module may import its own
# package and anything on a lower layer; two packages of one layer may not import each other.
LAYERS = [
    ("schemas", 0),
    ("components", 0),  # the namespace package itself (empty)
    ("components.config", 1),
    ("components.common", 2),
    ("components.corpus", 3),
    ("components.tracking", 3),
    ("components.tokenizer", 4),
    ("components.text_example_gen", 5),
    ("components.validation", 5),
    ("components.model", 5),
    ("components.serving", 6),
    ("components.training", 7),
    ("components.evaluation", 7),
    ("components.push", 7),
    ("components.tuner", 8),
    ("pipeline", 9),
    ("runners", 10),
]


# The tiers outside the layers, bottom to top: a module may import its own tier and lower ones.
TIERS = {"product": 0, "benchmarks": 1, "tests": 2}


def module_name(path: str) -> str:
    relative = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
    return relative[:-len(".__init__")] if relative.endswith(".__init__") else relative


def product_modules(packages: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    out = {}
    for package in packages:
        for root, dirs, files in os.walk(os.path.join(REPO, package)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(root, name)
                    out[module_name(path)] = path
    return out


def imports_of(path: str, name: str, modules: dict[str, str]) -> set[str]:
    """bigtrain modules `path` imports anywhere in its body (function-level imports included).
    `from pkg import mod` counts as an import of pkg.mod when that is a module."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    is_package = path.endswith("__init__.py")
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                parts = name.split(".")
                anchor = parts if is_package else parts[:-1]
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def layer_of(module: str) -> tuple[str, int]:
    matches = [(prefix, rank) for prefix, rank in LAYERS
               if module == prefix or module.startswith(prefix + ".")]
    assert matches, f"{module} is in no layer: add its package to LAYERS (and docs/layout.md)"
    return max(matches, key=lambda m: len(m[0]))


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = product_modules()
    return {name: imports_of(path, name, modules) for name, path in modules.items()}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, targets in sorted(graph.items()):
        own, rank = layer_of(module)
        for target in sorted(targets):
            other, other_rank = layer_of(target)
            if other == own or other_rank < rank:
                continue
            if other_rank > rank:
                wrong.append(f"{module} -> {target} (layer {rank} imports layer {other_rank})")
            else:
                wrong.append(f"{module} -> {target} (two packages of layer {rank})")
    return wrong


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def tier_of(module: str) -> str:
    top = module.split(".", 1)[0]
    return top if top in TIERS else "product"


def tier_problems(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a lower tier into a higher one: product -> benchmarks or tests, benchmarks ->
    tests."""
    return [f"{module} -> {target} ({tier_of(module)} imports {tier_of(target)})"
            for module, targets in sorted(graph.items()) for target in sorted(targets)
            if TIERS[tier_of(target)] > TIERS[tier_of(module)]]


@pytest.fixture(scope="module")
def tier_graph() -> dict[str, set[str]]:
    """The imports of every product and benchmark module, resolved against all three trees (tests'
    own imports are not read: they may import anything)."""
    modules = product_modules(PACKAGES + ("benchmarks", "tests"))
    return {name: imports_of(path, name, modules) for name, path in modules.items()
            if tier_of(name) != "tests"}


def test_no_import_runs_up_the_layers(graph):
    assert upward_imports(graph) == []


def test_no_import_cycle(graph):
    assert cycles(graph) == []


def test_the_checks_catch_what_they_claim():
    """Mutations: an upward import, a same-layer import and a two-file cycle are each reported."""
    assert upward_imports({"components.model.gpt": {"components.training.loop"}})
    assert upward_imports({"components.model.gpt": {"components.validation.schema"}})
    assert upward_imports({"components.training.loop": {"components.model.gpt"}}) == []
    assert cycles({"components.corpus.a": {"components.corpus.b"},
                   "components.corpus.b": {"components.corpus.a"}}) == [
        ["components.corpus.a", "components.corpus.b"]]


def test_every_module_has_a_layer(graph):
    for module in graph:
        layer_of(module)


def test_no_import_runs_up_the_tiers(tier_graph):
    assert any(name.startswith("benchmarks.") for name in tier_graph)  # benchmarks are read
    assert tier_problems(tier_graph) == []


def test_the_tier_check_catches_a_benchmark_importing_tests(tmp_path):
    """Mutation: a benchmark with the import benchmarks/lineage_scale.py had (a test helper) is
    reported, as are product code importing a benchmark or a test; tests importing a benchmark
    fixture are allowed."""
    modules = product_modules(PACKAGES + ("benchmarks", "tests"))
    old = tmp_path / "lineage_scale.py"
    old.write_text("def shared():\n    from tests.support.mlmd import connect\n")
    assert tier_problems({"benchmarks.lineage_scale": imports_of(
        str(old), "benchmarks.lineage_scale", modules)}) == [
        "benchmarks.lineage_scale -> tests.support.mlmd (benchmarks imports tests)"]
    assert tier_problems({"components.corpus.readers": {"benchmarks.support.single_process"},
                          "runners.cli": {"tests.support.mlmd"}}) == [
        "components.corpus.readers -> benchmarks.support.single_process (product imports benchmarks)",
        "runners.cli -> tests.support.mlmd (product imports tests)"]
    assert tier_problems({"tests.ui.conftest": {"benchmarks.support.lineage_store"},
                          "benchmarks.lineage_speed": {"pipeline.lineage.store"}}) == []
