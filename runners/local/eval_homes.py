"""`home:<path>` in data.decontaminate.eval_files: the eval split of another home's newest Examples,
resolved once where a run or a compile starts (before the input fingerprint), into
`examples:<that artifact's URI>`. The resolved config is the one the run saves (config.yaml), the
data stage's cache key and the up-to-date check see: new Examples in that home re-run this data
stage; the data stage decodes the eval split into text (components/text_example_gen/eval_split.py).

Which Examples: the newest LIVE `Examples` artifact (highest id) of that home's metadata store
(<home>/metadata.sqlite, read-only) that has an eval split on disk. A home whose runs used
another store (the `metadata` section, MySQL) cannot be named this way: name its Examples with
`examples:<URI>` instead.
"""

from __future__ import annotations

import os

from components import config as config_lib
from components.storage import fs
from components.common.errors import HomeError, MetadataStoreError, NotFoundError
from components.config import EXAMPLES_PREFIX, HOME_PREFIX, Config
from components.text_example_gen.shards import split_dir
from runners.local.home import default_sqlite_path


def latest_examples(home: str, where: str) -> str:
    """The URI of the newest LIVE Examples artifact of the home that has an eval split."""
    from ml_metadata.proto import metadata_store_pb2
    from pipeline.lineage.connection import connection_config, open_store
    if not os.path.isdir(home):
        raise HomeError(f"{where}: {home} is not a directory (a bigtrain home)")
    try:
        store = open_store(connection_config(default_sqlite_path(home), read_only=True))
    except MetadataStoreError as err:
        raise MetadataStoreError(f"{where}: {err}") from None
    live = sorted((a for a in store.get_artifacts_by_type("Examples")
                   if a.state == metadata_store_pb2.Artifact.LIVE), key=lambda a: -a.id)
    for artifact in live:
        if fs.glob(os.path.join(split_dir(artifact.uri, "eval"), "*")):
            return artifact.uri
    raise NotFoundError(f"{where}: the home {home} holds no Examples with an eval split (run its "
                        "data stage first: `bigtrain run --until TextExampleGen`)")


def resolve_eval_homes(config: Config) -> Config:
    """The config with every `home:<path>` of data.decontaminate.eval_files replaced by
    `examples:<URI>` of that home's newest Examples; unchanged without one."""
    entries = config.data.decontaminate.eval_files
    if not any(entry.startswith(HOME_PREFIX) for entry in entries):
        return config
    resolved = []
    for index, entry in enumerate(entries):
        if entry.startswith(HOME_PREFIX):
            home = os.path.abspath(os.path.expanduser(entry[len(HOME_PREFIX):]))
            where = f"data.decontaminate.eval_files[{index}] ({entry})"
            entry = EXAMPLES_PREFIX + latest_examples(home, where)
        resolved.append(entry)
    return config_lib.merge(config, {"data": {"decontaminate": {"eval_files": resolved}}})
