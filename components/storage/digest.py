"""The one code digest for cache keys: a stage's cache key must change when the code that decides
its output changes, not only when its settings or inputs do (TFX keys on exec properties); and
the content digest of a small input whose every byte decides the output (a held-out set)."""

from __future__ import annotations

import ast
import hashlib
import importlib
import os

from components.storage import fs


def module_path(name: str, root: str | None = None) -> str:
    """The source of a module (a package: its __init__.py). With `root`, looked up under that
    folder without importing anything (a copy of the tree); else where the import finds it."""
    if root is None:
        return importlib.import_module(name).__file__ or ""
    base = os.path.join(root, *name.split("."))
    return os.path.join(base, "__init__.py") if os.path.isdir(base) else base + ".py"


def source_files(*modules: str, suffixes: tuple[str, ...] = (".py",), exclude: tuple[str, ...] = (),
                 root: str | None = None) -> list[tuple[str, str]]:
    """Sorted [(label, path)] of the named modules' sources; a package contributes every file
    with one of `suffixes` under it, but for its sub-packages named in `exclude` (code the stage
    does not run). Labels are module-relative, so they are the same in every checkout of the same
    code. `root`: see module_path."""
    files: list[tuple[str, str]] = []
    for name in modules:
        path = module_path(name, root)
        if os.path.basename(path) != "__init__.py":
            files.append((name, path))
            continue
        top = os.path.dirname(path)
        for dirpath, dirnames, names in os.walk(top):
            package = ".".join([name] + [p for p in os.path.relpath(dirpath, top).split(os.sep)
                                         if p != "."])
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__"
                                 and f"{package}.{d}" not in exclude)
            for file_name in sorted(names):
                if file_name.endswith(suffixes):
                    full = os.path.join(dirpath, file_name)
                    files.append((f"{name}/{os.path.relpath(full, top)}", full))
    return sorted(files)


def file_digest(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def content_digest(path: str, chunk_bytes: int = 1 << 20) -> str:
    """sha256 of a file's bytes, local or s3:// / gs:// (through the filesystem seam), read a
    chunk at a time: a data file's size does not reach memory."""
    outer = hashlib.sha256()
    with fs.open_file(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(chunk_bytes), b""):
            outer.update(chunk)
    return outer.hexdigest()


def code_digest(*modules: str, exclude: tuple[str, ...] = (), root: str | None = None) -> str:
    """sha256 over the source of the named modules (see source_files)."""
    outer = hashlib.sha256()
    for label, path in source_files(*modules, exclude=exclude, root=root):
        outer.update(f"{label}\0{file_digest(path)}\n".encode())
    return outer.hexdigest()


# The packages of the product: a stage's import closure stays inside them.
PRODUCT_PACKAGES = ("schemas", "components", "pipeline", "runners")


def product_modules(root: str | None = None) -> dict[str, str]:
    """{module name: source path} of every module of PRODUCT_PACKAGES under `root` (default: the
    checkout this module is in)."""
    root = root or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    found = {}
    for package in PRODUCT_PACKAGES:
        for dirpath, dirnames, names in os.walk(os.path.join(root, package)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for file_name in names:
                if file_name.endswith(".py"):
                    parts = os.path.relpath(os.path.join(dirpath, file_name), root)[:-3].split(os.sep)
                    found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = \
                        os.path.join(dirpath, file_name)
    return found


# {(path, module name, mtime, size): its imported names}: a pipeline build computes four closures over the
# same files; a file edited since (a test's copy of the tree) has a new key.
_PARSED: dict[tuple, list[str]] = {}


def _imported_names(path: str, name: str) -> list[str]:
    """Every dotted name `path` imports, anywhere in its body (function-level imports too);
    `from pkg import x` gives pkg.x (a module or not: the caller resolves it)."""
    stat = os.stat(path)
    key = (path, name, stat.st_mtime_ns, stat.st_size)
    if key not in _PARSED:
        _PARSED[key] = _parse_imports(path, name)
    return _PARSED[key]


def _statements(nodes):
    """Every statement, nested blocks included (functions, classes, if / try / with / match):
    imports are statements, so expressions need no visit (ast.walk's cost)."""
    for node in nodes:
        yield node
        for block in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(node, block, None)
            if isinstance(children, list):
                yield from _statements(children)


def _parse_imports(path: str, name: str) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    anchor = name.split(".") if path.endswith("__init__.py") else name.split(".")[:-1]
    out = []
    for node in _statements(tree.body):
        if isinstance(node, ast.Import):
            out.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(anchor[:len(anchor) - node.level + 1] + ([base] if base else []))
            out.extend(f"{base}.{alias.name}" for alias in node.names)
    return out


def import_closure(*entries: str, leave_out: tuple[str, ...] = (), root: str | None = None
                   ) -> list[str]:
    """Sorted product modules the `entries` run: each entry and what it imports, transitively
    (module and function level; a module's parent packages too, which Python runs first), but
    for modules under `leave_out` (packages whose changes reach the stage otherwise)."""
    return sorted(_closure(entries, leave_out, product_modules(root)))


def _closure(entries, leave_out: tuple[str, ...], modules: dict[str, str]) -> set[str]:
    def kept(module: str) -> bool:
        return not any(module == p or module.startswith(p + ".") for p in leave_out)
    closure, todo = set(), list(entries)
    while todo:
        target = todo.pop()
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if not target or target in closure or not kept(target):
            continue
        closure.add(target)
        parts = target.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        todo.extend(_imported_names(modules[target], target))
    return closure


def closure_digest(*entries: str, leave_out: tuple[str, ...] = (), root: str | None = None) -> str:
    """code_digest of the entries' import_closure: the one code key of a stage (the product's
    modules listed once for both)."""
    outer = hashlib.sha256()
    modules = product_modules(root)
    for name in sorted(_closure(entries, leave_out, modules)):
        outer.update(f"{name}\0{file_digest(modules[name])}\n".encode())
    return outer.hexdigest()
