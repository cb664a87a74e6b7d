"""The split folders of a TFX artifact (Examples, ExampleStatistics, ExampleAnomalies): one
folder `Split-<name>` per split under the artifact's URI (TFX's layout). The one place the folder
name is spelt; the data stage's shards (text_example_gen/shards.py), the Trainer, the Evaluator,
the validation gate and the lineage questions build and read it here."""

from __future__ import annotations

import os

from components.storage import fs

SPLIT_PREFIX = "Split-"


def split_dir(uri: str, split: str) -> str:
    """The folder of one split of the artifact at `uri`."""
    return os.path.join(uri, f"{SPLIT_PREFIX}{split}")


def split_names(uri: str) -> list[str]:
    """The splits the artifact at `uri` holds, sorted; [] when `uri` does not exist (fs.listdir)."""
    return sorted(name[len(SPLIT_PREFIX):] for name in fs.listdir(uri)
                  if name.startswith(SPLIT_PREFIX))
