"""Opening an MLMD store: the connection config (sqlite or MySQL, read-only or not as each caller
says), the one opener (open_store), and the named errors of a store that is missing, empty,
truncated, not a database, damaged or locked. runners/local/metadata.py builds the config of a
bigtrain config's store through connection_config."""

from __future__ import annotations

import contextlib
import os

from ml_metadata import errors, metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.common.errors import MetadataStoreError

# The table MLMD keeps its schema version in: present in every MLMD store, in no other database.
MLMD_MARKER_TABLE = "MLMDEnv"


def connection_config(sqlite_path: str | None = None, *, read_only: bool,
                      mysql_host: str | None = None, mysql_port: int = 3306,
                      mysql_database: str | None = None, mysql_user: str | None = None,
                      mysql_password: str | None = None) -> metadata_store_pb2.ConnectionConfig:
    """MLMD's connection to a sqlite file or to a MySQL/MariaDB server. read_only, no default:
    every caller says whether it writes (a run) or only reads (lineage, ui), since a reader must
    never create a store and a writer must be able to."""
    config = metadata_store_pb2.ConnectionConfig()
    if mysql_host:
        config.mysql.host, config.mysql.port = mysql_host, mysql_port
        config.mysql.database = mysql_database or "metadb"
        config.mysql.user = mysql_user or "root"
        if read_only:  # a reader never creates the database (writers' configs stay as they were)
            config.mysql.skip_db_creation = True
        if mysql_password:
            config.mysql.password = mysql_password
    else:
        config.sqlite.filename_uri = sqlite_path
        modes = metadata_store_pb2.SqliteMetadataSourceConfig
        config.sqlite.connection_mode = (modes.READONLY if read_only
                                         else modes.READWRITE_OPENCREATE)
    return config


def describe(config: metadata_store_pb2.ConnectionConfig) -> str:
    if config.HasField("mysql"):
        return f"MySQL {config.mysql.user}@{config.mysql.host}:{config.mysql.port}/{config.mysql.database}"
    return config.sqlite.filename_uri


def open_sqlite_read_only(path: str, timeout: float):
    """A sqlite3 connection to the file that can only read it (never creates or writes it);
    waits at most `timeout` seconds on a writer's lock."""
    import sqlite3
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=timeout)


def open_mysql(config: metadata_store_pb2.ConnectionConfig, database: str | None = None):
    """A pymysql connection to the server of a MySQL ConnectionConfig (its user and password),
    to `database` or to none (the server only)."""
    import pymysql
    m = config.mysql
    return pymysql.connect(host=m.host, port=m.port or 3306, user=m.user,
                           password=m.password or "", database=database, connect_timeout=10)


def check_sqlite(path: str, *, must_exist: bool = True, thorough: bool = False) -> None:
    """Named errors for a sqlite store that MLMD would only report as a raw query error: missing,
    empty or truncated, not a database, damaged, or locked by another process. Reads only (a
    read-only connection with a short busy timeout: never waits on a writer for long).
    thorough: also sqlite's quick_check of every page (0.5 s at 10,000 runs, so it runs only
    once MLMD failed on the store, see open_store; otherwise the schema page is read)."""
    import sqlite3
    if not os.path.exists(path):
        if must_exist:
            raise MetadataStoreError(f"no metadata database at {path} (run `bigtrain run` first, or "
                                     "pass --home or --metadata)")
        return
    if not os.path.isfile(path):
        raise MetadataStoreError(f"metadata store {path} is not a file (a directory?); move it "
                                 "aside to start a new lineage history, or pass --metadata")
    size = os.path.getsize(path)
    if size == 0:
        raise MetadataStoreError(f"metadata store {path} is empty (0 bytes: truncated?); move it "
                                 "aside to start a new lineage history, or restore it from a backup")
    with open(path, "rb") as fh:
        header = fh.read(100)
    if not header.startswith(b"SQLite format 3\0"):
        raise MetadataStoreError(f"metadata store {path} is not an SQLite database (corrupt or "
                                 "overwritten); move it aside or restore it from a backup")
    if len(header) == 100:  # header: page size at 16, database size in pages at 28
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(header[28:32], "big")
        if pages and size < page_size * pages:
            raise MetadataStoreError(
                f"metadata store {path} is truncated ({size} bytes, its header says "
                f"{page_size * pages}); move it aside or restore it from a backup")
    try:
        with contextlib.closing(open_sqlite_read_only(path, timeout=2)) as db:
            result = db.execute("PRAGMA quick_check" if thorough
                                else "SELECT 'ok' FROM sqlite_master LIMIT 1").fetchone()
            has_store = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                   (MLMD_MARKER_TABLE,)).fetchone() is not None
    except sqlite3.OperationalError as err:
        if "locked" in str(err) or "busy" in str(err):
            raise MetadataStoreError(
                f"metadata store {path} is locked by another process ({err}); bigtrain runs take "
                "<home>/.bigtrain.lock instead, so this is another program holding a write "
                "transaction: close it and retry") from None
        raise MetadataStoreError(f"metadata store {path} cannot be read: {err}") from None
    except sqlite3.DatabaseError as err:
        raise MetadataStoreError(f"metadata store {path} is damaged ({err}); move it aside or "
                                 "restore it from a backup") from None
    if result and result[0] != "ok":
        raise MetadataStoreError(f"metadata store {path} is damaged (sqlite quick_check: "
                                 f"{result[0]}); move it aside or restore it from a backup")
    if must_exist and not has_store:
        raise MetadataStoreError(f"{path} is an SQLite database without an MLMD store in it (no "
                                 f"{MLMD_MARKER_TABLE} table): not a bigtrain metadata store; pass "
                                 "--home or --metadata of a store `bigtrain run` wrote")


def check_sqlite_writable(path: str) -> None:
    """A writer's sqlite store (and its folder, where sqlite puts its journal) must be writable:
    sqlite opens a read-only file read-only without a word, and the run's first write then fails
    as MLMD's raw 'attempt to write a readonly database'. Checked without writing: the file's
    and the folder's permissions, and a read-only mount (which binds root too)."""
    folder = os.path.dirname(os.path.abspath(path))
    for place in (p for p in (path, folder) if os.path.exists(p)):
        why = ("a read-only mount" if os.statvfs(place).f_flag & os.ST_RDONLY
               else "" if os.access(place, os.W_OK) else "its permissions")
        if why:
            raise MetadataStoreError(
                f"metadata store {path} is read-only ({place} cannot be written: {why}); a run "
                "records every stage in it: make it writable, or pass --home or --metadata of a "
                "writable store (reading it needs no write: `bigtrain lineage`)")


def check_mysql(config: metadata_store_pb2.ConnectionConfig) -> None:
    """A reader's MySQL database must already hold an MLMD store: MLMD would create its schema in
    an empty database when it connects (a write; MLMD has no read-only mode for MySQL), so its
    tables are looked for first, with a read-only query of information_schema (pymysql)."""
    import pymysql
    m = config.mysql
    try:
        with contextlib.closing(open_mysql(config)) as db:
            with db.cursor() as cursor:
                cursor.execute("SELECT COUNT(*) FROM information_schema.tables WHERE "
                               "table_schema = %s AND table_name = %s",
                               (m.database, MLMD_MARKER_TABLE))
                (found,) = cursor.fetchone()
    except pymysql.Error as err:
        raise MetadataStoreError(f"metadata store {describe(config)} cannot be read: {err}") from None
    if not found:
        raise MetadataStoreError(
            f"metadata store {describe(config)} holds no MLMD store (no {MLMD_MARKER_TABLE} table; "
            "the database is missing or empty): run `bigtrain run` with this metadata setting "
            "first; a reader never creates one")


def open_store(config: metadata_store_pb2.ConnectionConfig) -> metadata_store.MetadataStore:
    """MetadataStore(config), its failures as named errors (exit code 5) instead of MLMD's raw
    'Error when executing query' RuntimeErrors."""
    if config.HasField("sqlite"):
        reader = (config.sqlite.connection_mode
                  == metadata_store_pb2.SqliteMetadataSourceConfig.READONLY)
        check_sqlite(config.sqlite.filename_uri, must_exist=reader)
        if not reader:
            check_sqlite_writable(config.sqlite.filename_uri)
    elif config.mysql.skip_db_creation:  # a reader's connection (connection_config read_only)
        check_mysql(config)
    try:
        store = metadata_store.MetadataStore(config)
        store.get_context_types()  # MySQL connects lazily in places: fail here, named
        return store
    except (RuntimeError, errors.StatusError) as err:
        diagnose(config)
        raise MetadataStoreError(f"metadata store {describe(config)}: {err}") from None


def diagnose(config: metadata_store_pb2.ConnectionConfig) -> None:
    """After MLMD failed on a sqlite store: the named error of a damaged one (quick_check)."""
    if config.HasField("sqlite"):
        check_sqlite(config.sqlite.filename_uri, thorough=True)
