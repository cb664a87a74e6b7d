"""The default input, `<stdlib>/**/*.py` minus the site-packages excludes (what `make run` and the
README's first command read), lists exactly the interpreter's standard library.

The reference is independent of the listing: `os.walk` over `sysconfig`'s stdlib path, keeping
`.py` files that lie under no `site-packages` / `dist-packages` folder. Like glob's `*` and `**`,
it skips names starting with a dot and follows links to folders.

Catches: `<stdlib>` expanded to another folder (purelib, the venv's site-packages), the glob no
longer recursive, the excludes dropped or matched against the relative path, another root."""

from __future__ import annotations

import os
import sysconfig

from components import config as config_lib
from components.storage.listing import list_input_files

THIRD_PARTY_FOLDERS = {"site-packages", "dist-packages"}


def stdlib_python_files() -> dict[str, str]:
    """relative path -> absolute path of every .py file of the standard library, by os.walk."""
    root = sysconfig.get_paths()["stdlib"]
    found = {}
    for folder, subfolders, files in os.walk(root, followlinks=True):
        subfolders[:] = [name for name in subfolders
                         if not name.startswith(".") and name not in THIRD_PARTY_FOLDERS]
        for name in files:
            if name.endswith(".py") and not name.startswith("."):
                path = os.path.join(folder, name)
                found[os.path.relpath(path, root)] = os.path.abspath(path)
    return found


def test_default_input_lists_the_standard_library():
    data = config_lib.DataConfig()
    assert data.input == "<stdlib>/**/*.py"
    root, files = list_input_files(data.input, data.exclude)
    assert root == os.path.abspath(sysconfig.get_paths()["stdlib"])
    assert files == sorted(files)
    expected = stdlib_python_files()
    assert dict(files) == expected
    relative = {path for path, _ in files}
    assert {"os.py", "json/__init__.py", "email/mime/text.py"} <= relative  # three levels deep
    assert len(files) > 500, len(files)  # CPython 3.11 has ~1,900 (tests included)


def test_excludes_leave_out_third_party_code():
    """The stdlib folder of a base interpreter holds site-packages; none of it is listed."""
    data = config_lib.DataConfig()
    _, files = list_input_files(data.input, data.exclude)
    assert not [path for path, _ in files if THIRD_PARTY_FOLDERS & set(path.split(os.sep))]
