"""The import graph of the code, derived from the source: the modules of a tree, the bigtrain
modules each imports (module level or inside a function), and the layer of each package (LAYERS;
docs/layout.md has the picture)."""

import ast
import os


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


PACKAGES = ("schemas", "components", "pipeline", "runners")


# Layer of each package prefix (the longest matching prefix wins). A module may import its own
# package and anything on a lower layer; two packages of one layer may not import each other.
LAYERS = [
    ("schemas", 0),
    ("components", 0),  # the namespace package itself (empty)
    ("components.config", 1),
    ("components.common", 1),
    ("components.storage", 2),
    ("components.corpus", 3),
    ("components.tracking", 3),
    ("components.tokenizer", 4),
    ("components.text_example_gen", 5),
    ("components.validation", 5),
    ("components.model", 5),
    ("components.serving", 6),
    ("components.metrics", 6),
    ("components.training", 7),
    ("components.evaluation", 7),
    ("components.push", 7),
    ("components.tuner", 8),
    ("pipeline", 9),
    ("pipeline.lineage", 9),
    ("runners", 10),
    ("runners.beam", 11),
    ("runners.local", 12),
    ("runners.orchestrators", 12),
    ("runners.cli", 13),
]


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
