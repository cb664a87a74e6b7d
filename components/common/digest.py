"""The one code digest for cache keys: a stage's cache key must change when the code that decides
its output changes, not only when its settings or inputs do (TFX keys on exec properties); and
the content digest of a small input whose every byte decides the output (a held-out set)."""

from __future__ import annotations

import hashlib
import importlib
import os

from components.common import fs


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
