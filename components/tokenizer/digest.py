"""Code digests for cache keys: a stage's cache key must change when the code that decides its
output changes, not only when its settings or inputs do (TFX keys on exec properties)."""

from __future__ import annotations

import hashlib
import importlib
import os


def code_digest(*modules: str) -> str:
    """sha256 over the source of the named modules; a package contributes every .py file under
    it. Names, not paths: the digest is the same in every checkout of the same code."""
    files: list[tuple[str, str]] = []
    for name in modules:
        module = importlib.import_module(name)
        path = module.__file__ or ""
        if os.path.basename(path) == "__init__.py":
            root = os.path.dirname(path)
            for dirpath, dirnames, names in os.walk(root):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                for file_name in sorted(names):
                    if file_name.endswith(".py"):
                        full = os.path.join(dirpath, file_name)
                        files.append((f"{name}/{os.path.relpath(full, root)}", full))
        else:
            files.append((name, path))
    outer = hashlib.sha256()
    for label, path in sorted(files):
        with open(path, "rb") as fh:
            outer.update(f"{label}\0{hashlib.sha256(fh.read()).hexdigest()}\n".encode())
    return outer.hexdigest()


# What decides a Tokenizer artifact: this package, and the data stage's listing, classification
# and split rules that documents.read_documents applies.
TOKENIZER_CODE = ("components.tokenizer", "components.text_example_gen.readers",
                  "components.text_example_gen.documents", "components.text_example_gen.transforms")


def tokenizer_code_digest() -> str:
    return code_digest(*TOKENIZER_CODE)
