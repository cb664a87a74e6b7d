"""The one code digest for cache keys: a stage's cache key must change when the code that decides
its output changes, not only when its settings or inputs do (TFX keys on exec properties)."""

from __future__ import annotations

import hashlib
import importlib
import os


def source_files(*modules: str, suffixes: tuple[str, ...] = (".py",)) -> list[tuple[str, str]]:
    """Sorted [(label, path)] of the named modules' sources; a package contributes every file
    with one of `suffixes` under it. Labels are module-relative, so they are the same in every
    checkout of the same code."""
    files: list[tuple[str, str]] = []
    for name in modules:
        module = importlib.import_module(name)
        path = module.__file__ or ""
        if os.path.basename(path) != "__init__.py":
            files.append((name, path))
            continue
        root = os.path.dirname(path)
        for dirpath, dirnames, names in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for file_name in sorted(names):
                if file_name.endswith(suffixes):
                    full = os.path.join(dirpath, file_name)
                    files.append((f"{name}/{os.path.relpath(full, root)}", full))
    return sorted(files)


def file_digest(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def code_digest(*modules: str) -> str:
    """sha256 over the source of the named modules (see source_files)."""
    outer = hashlib.sha256()
    for label, path in source_files(*modules):
        outer.update(f"{label}\0{file_digest(path)}\n".encode())
    return outer.hexdigest()
