"""The SavedModel's assets.extra folder, the one place that names it: TF Serving's place for files
beside the graph that are not the model (it replays the warm-up file from there). bigtrain keeps
its run metadata there (the model info, the push record), which the model's digest leaves out."""

from __future__ import annotations

import os

ASSETS_EXTRA = "assets.extra"


def extra_file(name: str) -> str:
    """A file's path inside assets.extra, relative to the SavedModel's folder."""
    return os.path.join(ASSETS_EXTRA, name)


def is_extra(relative: str) -> bool:
    """Whether a path relative to the SavedModel's folder lies inside assets.extra."""
    return relative.replace(os.sep, "/").split("/", 1)[0] == ASSETS_EXTRA
