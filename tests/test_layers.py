"""The house's layers, derived from the code: every import (module level or inside a function)
of a bigtrain module points down the layer order, no two packages of one layer import each other,
and no file-level cycle exists. Outside the layers, the same import graph keeps three tiers apart:
the product never imports `benchmarks` or `tests`, and `benchmarks` (shipped beside the product)
never imports `tests`; tests may import both (a fixture they share with a benchmark lives in
`benchmarks/support/`). Inside `tests`, no module imports a `test_*.py` module: a helper that
two test modules share lives in `tests/support/` (or a conftest). Run on every test tier, so the
layout stays true.

Layers, bottom to top: LAYERS in tests/support/import_graph.py (docs/layout.md has the picture)."""

from __future__ import annotations

import pytest

from tests.support.import_graph import LAYERS, PACKAGES, imports_of, product_modules


# The tiers outside the layers, bottom to top: a module may import its own tier and lower ones.
TIERS = {"product": 0, "benchmarks": 1, "tests": 2}


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
                          "runners.cli.app": {"tests.support.mlmd"}}) == [
        "components.corpus.readers -> benchmarks.support.single_process (product imports benchmarks)",
        "runners.cli.app -> tests.support.mlmd (product imports tests)"]
    assert tier_problems({"tests.ui.conftest": {"benchmarks.support.lineage_store"},
                          "benchmarks.lineage_speed": {"pipeline.lineage.store"}}) == []


def cross_test_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports of a `test_*.py` module by another module (a test, a conftest, a support module)."""
    return [f"{module} -> {target}" for module, targets in sorted(graph.items())
            for target in sorted(targets) if target.rpartition(".")[2].startswith("test_")]


@pytest.fixture(scope="module")
def tests_graph() -> dict[str, set[str]]:
    """The imports of every module under tests/, resolved against all three trees."""
    modules = product_modules(PACKAGES + ("benchmarks", "tests"))
    return {name: imports_of(path, name, modules) for name, path in modules.items()
            if tier_of(name) == "tests"}


def test_no_test_module_imports_another(tests_graph):
    """A helper two test modules share lives in tests/support/ (or a conftest): a test module
    importing another one runs the other's module-level code, ties their fixtures and groups
    together and hides the helper where nobody looks for it."""
    assert any(name.startswith("tests.support.") for name in tests_graph)  # tests are read
    assert cross_test_imports(tests_graph) == []


def test_the_test_import_check_catches_a_function_level_import(tmp_path):
    """Mutation: a function-level import of a helper from another test module (as
    tests/components/test_tokenizer_sample_pipeline.py had) is reported; support and conftest
    imports are not."""
    modules = product_modules(PACKAGES + ("benchmarks", "tests"))
    old = tmp_path / "test_old.py"
    old.write_text("from tests.support.mixture_sources import WEIGHTS\n"
                   "from tests.e2e.conftest import base_args\n"
                   "def test_x():\n    from tests.components.test_mixture import make_sources\n")
    found = imports_of(str(old), "tests.components.test_old", modules)
    assert cross_test_imports({"tests.components.test_old": found}) == [
        "tests.components.test_old -> tests.components.test_mixture"]
