"""Which ML Metadata store a command uses, chosen one way for every command (`run`, `lineage`,
`compile`, ...): `--metadata URI`, else the environment variable BIGTRAIN_METADATA, else the
config's `metadata` section (default: <home>/metadata.sqlite). A URI only sets that section, so
the resolved config (config.yaml of a run) always says where its lineage went.

URI: a sqlite file path (optionally `sqlite:` + path), or `mysql://USER@HOST:PORT/DATABASE`
(USER, PORT and DATABASE optional: root, 3306, metadb). A MySQL password is read only from the
environment variable the section names (default BIGTRAIN_METADATA_PASSWORD), never from the
command line or a file."""

from __future__ import annotations

import os
import urllib.parse

from components import config as config_lib
from components.storage.fs import is_remote
from components.config import Config, ConfigError
from runners.local.home import default_sqlite_path

METADATA_ENV = "BIGTRAIN_METADATA"


def parse_metadata_uri(uri: str) -> dict:
    """The `metadata` section values a URI stands for. Raises ConfigError naming the URI."""
    if uri.startswith("mysql://"):
        parts = urllib.parse.urlsplit(uri)
        if parts.password is not None:
            raise ConfigError(f"metadata URI {parts.hostname}: holds a password; set it in the "
                              "environment variable BIGTRAIN_METADATA_PASSWORD instead (never on "
                              "the command line)")
        try:
            port = parts.port or 3306
        except ValueError:
            raise ConfigError(f"metadata URI {uri!r}: the port is not a number") from None
        database = parts.path.lstrip("/")
        if not parts.hostname or "/" in database:
            raise ConfigError(f"metadata URI {uri!r}: expected mysql://USER@HOST:PORT/DATABASE")
        return {"backend": "mysql", "mysql_host": parts.hostname, "mysql_port": port,
                "mysql_user": urllib.parse.unquote(parts.username or "root"),
                "mysql_database": database or "metadb"}
    if is_remote(uri) and not uri.startswith("sqlite://"):
        raise ConfigError(f"metadata URI {uri!r}: expected a sqlite file path or "
                          "mysql://USER@HOST:PORT/DATABASE")
    path = uri[len("sqlite://"):] if uri.startswith("sqlite://") else uri
    path = path[len("sqlite:"):] if path.startswith("sqlite:") else path
    if not path:
        raise ConfigError(f"metadata URI {uri!r}: names no sqlite file")
    return {"backend": "sqlite", "sqlite_path": os.path.abspath(path)}


def with_metadata_uri(config: Config, uri: str | None) -> Config:
    """The config with its `metadata` section set from `uri` (--metadata), else from
    $BIGTRAIN_METADATA; unchanged when neither is set."""
    uri = uri or os.environ.get(METADATA_ENV)
    if not uri:
        return config
    return config_lib.merge(config, {"metadata": parse_metadata_uri(uri)})


def sqlite_path(config: Config) -> str | None:
    """The sqlite file of the config's store; None for MySQL."""
    if config.metadata.backend != "sqlite":
        return None
    return os.path.abspath(config.metadata.sqlite_path
                           or default_sqlite_path(config.paths.home))


def mysql_password(metadata: config_lib.MetadataConfig) -> str:
    """The MySQL password from the environment variable the section names; a ConfigError naming
    that variable when it is not set (set it empty for a server without a password)."""
    password = os.environ.get(metadata.mysql_password_env)
    if password is None:
        raise ConfigError(
            f"metadata store MySQL {metadata.mysql_user}@{metadata.mysql_host}:"
            f"{metadata.mysql_port}/{metadata.mysql_database}: set its password in the environment "
            f"variable {metadata.mysql_password_env} (empty for none; it is never read from the "
            "command line or a file)")
    return password


def connection(config: Config, *, read_only: bool):
    """MLMD ConnectionConfig of the config's store; read_only as connection_config (no default:
    `run` writes, `lineage` and `ui` read)."""
    from pipeline.lineage.connection import connection_config
    m = config.metadata
    if m.backend == "mysql":
        return connection_config(mysql_host=m.mysql_host, mysql_port=m.mysql_port,
                                 mysql_database=m.mysql_database, mysql_user=m.mysql_user,
                                 mysql_password=mysql_password(m), read_only=read_only)
    return connection_config(sqlite_path(config), read_only=read_only)


def store_exists(config: Config) -> bool:
    """MySQL stores always exist (MLMD creates the schema); a sqlite one once its file does."""
    return config.metadata.backend == "mysql" or os.path.exists(sqlite_path(config))
