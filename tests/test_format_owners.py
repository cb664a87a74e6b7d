"""Every on-disk format has one owner module: the others import its names and functions and never
restate a folder name or a file pattern (docs/layout.md, "How to add a module", rule 3).

Scans the product packages with `ast` for string literals (f-string pieces included, docstrings
excluded: a docstring may describe a layout, code may not spell it). Two kinds of literal:
- a distinctive piece of a format (".incoming-", "state-", "bigtrain_push.json"): reported in
  any string outside its owner but prose (a message or help text, with spaces, may name a file
  for the user as a docstring may: it builds no path);
- a plain word that names a folder or file ("checkpoints", "runs", "serving"): reported only
  where it is used as a path, i.e. as an argument of a `join` call or the value of an
  UPPER_CASE constant, because the same word is also an ordinary dictionary key or message word.
Each owner must spell its literals itself, so the table cannot go stale silently."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PRODUCT = ("components", "pipeline", "runners", "benchmarks")

CHECKPOINTS = "components/storage/checkpoints.py"
STAGING = "components/push/staging.py"
SERVING_LAYOUT = "components/push/layout.py"
HOME = "runners/local/home.py"
CONFIG_FILE = "components/config/loading.py"
ASSETS = "components/serving/assets.py"
TOKENIZER_FILES = "components/tokenizer/base.py"
HF = "components/serving/hf/__init__.py"
VARIANTS = "components/serving/variants.py"
SPLITS = "components/storage/splits.py"

# literal -> its owner; found in any string elsewhere
PIECES = {
    ".worker-": CHECKPOINTS, "input-": CHECKPOINTS, "state-": CHECKPOINTS, "_temp": CHECKPOINTS,
    "ckpt": CHECKPOINTS,
    ".incoming-": STAGING, ".retired-": STAGING, ".claims": STAGING,
    "bigtrain_push.json": SERVING_LAYOUT, "saved_model.pb": SERVING_LAYOUT,
    "models.config": SERVING_LAYOUT, "batching_parameters": SERVING_LAYOUT,
    ".bigtrain.lock": HOME, "run.log": HOME,
    "config.yaml": CONFIG_FILE, "metadata.sqlite": "components/config/tree.py",
    "assets.extra": ASSETS, "variants.json": VARIANTS,
    "bigtrain_tokenizer.json": TOKENIZER_FILES, "tokenizer.model": TOKENIZER_FILES,
    "tokenizer.vocab": TOKENIZER_FILES,
    "tokenizer.json": HF, "config.json": HF, "model.safetensors": HF, "generation_config.json": HF,
    "tokenizer_config.json": HF,
    "Split-": SPLITS,   # a TFX artifact's split folders: Split-train, Split-eval
}
# (literal, module): why that module spells a literal another module owns
ALSO_SPELT = {
    ("tokenizer.json", TOKENIZER_FILES): "the old name of bigtrain's own tokenizer description "
                                         "(LEGACY_DESCRIPTION_FILE), read for artifacts written "
                                         "before the rename; the Hugging Face file is another format",
}
# literal -> its owner; found only where used as a path (join argument, UPPER_CASE constant)
PATH_WORDS = {
    "checkpoints": CHECKPOINTS, "checkpoint": CHECKPOINTS,
    "runs": HOME, "pipelines": HOME, "serving": HOME,
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _path_uses(tree: ast.AST) -> set[int]:
    """The string constants used as a path: join arguments and UPPER_CASE constants' values."""
    found = set()
    for node in ast.walk(tree):
        values = []
        if isinstance(node, ast.Call):
            function = node.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
            if name == "join":
                values = node.args
        elif isinstance(node, ast.Assign) and all(
                isinstance(t, (ast.Name, ast.Tuple)) for t in node.targets):
            names = [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            if names and all(n.isupper() or n.lstrip("_").isupper() for n in names):
                values = [node.value]
        for value in values:
            found |= {id(c) for c in ast.walk(value) if isinstance(c, (ast.Constant, ast.JoinedStr))}
    return found


def literals(source: str, filename: str = "<source>") -> list[tuple[int, str, bool]]:
    """(line, text, used as a path) of every string literal in code (not docstrings); an f-string
    is one literal, its formatted values written as {}."""
    tree = ast.parse(source, filename)
    docstrings, paths = _docstrings(tree), _path_uses(tree)
    found, pieces = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in node.values]
            pieces |= {id(v) for v in node.values}
            found.append((node.lineno, "".join(parts), id(node) in paths))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in docstrings and id(node) not in pieces):
            found.append((node.lineno, node.value, id(node) in paths))
    return found


def restatements(source: str, module: str) -> list[str]:
    """Format literals `module` spells that another module owns."""
    found = []
    for line, text, as_path in literals(source, module):
        for piece, owner in PIECES.items():
            if piece in text and owner != module and not any(c.isspace() for c in text) \
                    and (piece, module) not in ALSO_SPELT:
                found.append(f"{module}:{line} {text!r} restates {piece!r} (owner: {owner})")
        owner = PATH_WORDS.get(text)
        if as_path and owner and owner != module:
            found.append(f"{module}:{line} {text!r} used as a path (owner: {owner})")
    return found


def product_sources() -> dict[str, str]:
    return {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
            for package in PRODUCT for path in sorted((ROOT / package).rglob("*.py"))}


def test_no_format_literal_outside_its_owner():
    found = [hit for module, source in product_sources().items()
             for hit in restatements(source, module)]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize("owner", sorted(set(PIECES.values()) | set(PATH_WORDS.values())))
def test_each_owner_spells_its_literals(owner):
    """The table is true: the owner module exists and holds each literal it is said to own."""
    texts = [text for _, text, _ in literals((ROOT / owner).read_text(encoding="utf-8"), owner)]
    owned = [p for p, o in PIECES.items() if o == owner] + [w for w, o in PATH_WORDS.items()
                                                           if o == owner]
    assert [literal for literal in owned if not any(literal in t for t in texts)] == []


def test_the_check_catches_what_it_claims():
    """Mutations: a staging name in an f-string, a checkpoint folder joined by hand and a home
    folder as a constant are reported; the same words in a docstring, a message or a dict key
    are not."""
    source = '''"""Docs may say <home>/runs and .incoming-<v>."""
import os
RUNS = "runs"
def f(root, version, pid):
    """Also .worker-<n> here."""
    staging = f"{root}/.incoming-{version}-{pid}"
    return (os.path.join(root, "checkpoints"), staging, {"runs": 1}, "no checkpoints left",
            f"remove {root}/.incoming-{version} by hand")
'''
    found = [hit.split(" ", 1)[1] for hit in restatements(source, "runners/local/run.py")]
    assert sorted(found) == sorted([
        f"'runs' used as a path (owner: {HOME})",
        f"'{{}}/.incoming-{{}}-{{}}' restates '.incoming-' (owner: {STAGING})",
        f"'checkpoints' used as a path (owner: {CHECKPOINTS})"])
    assert len(restatements(source, HOME)) == 2   # its own folder name is the owner's to spell


def test_a_split_folder_spelt_by_hand_is_caught():
    """Mutation: the Trainer's worker joining "Split-train" itself (as it did before
    components/storage/splits.py) is reported; the owner's call and a help text are not."""
    source = ('import os\nfrom components.common import splits\n'
              'def f(examples_dir):\n'
              '    return (os.path.join(examples_dir, "Split-train", "*"),\n'
              '            splits.split_dir(examples_dir, "eval"),\n'
              '            "shards (DIR/Split-train/*) of an Examples artifact")\n')
    found = [hit.split(" ", 1)[1] for hit in restatements(source, "components/training/worker.py")]
    assert found == [f"'Split-train' restates 'Split-' (owner: {SPLITS})"]
    assert restatements(source, SPLITS) == []
