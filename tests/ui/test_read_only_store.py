"""Readers (`bigtrain ui`, `bigtrain lineage`) never create an MLMD store: a missing file, an
empty one or an SQLite database without MLMD's tables is a named store error (exit code 5), and
the file is left as it was (not created, no MLMD schema written into it). On MySQL, where MLMD has
no read-only mode and creates its schema in an empty database, the reader's connection skips
database creation and looks for MLMD's tables first (connection.check_mysql)."""

import hashlib
import sqlite3

import pytest

from components.common import errors
from pipeline.lineage import connection
from runners.cli import app as cli


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _serving(monkeypatch):
    calls = []
    monkeypatch.setattr("pipeline.lineage.web.app.serve", lambda *a, **kw: calls.append(a))
    return calls


@pytest.mark.parametrize("command", [["ui"], ["lineage", "runs"]])
def test_a_missing_store_file_is_not_created(tmp_path, monkeypatch, capsys, command):
    calls = _serving(monkeypatch)
    path = tmp_path / "nowhere.sqlite"
    assert cli.main([*command, "--home", str(tmp_path), "--metadata", str(path)]) == errors.EXIT_STORE
    assert "no metadata database" in capsys.readouterr().err
    assert not path.exists() and calls == []


@pytest.mark.parametrize("command", [["ui"], ["lineage", "runs"]])
def test_an_empty_file_or_a_database_without_mlmd_is_refused_untouched(tmp_path, monkeypatch,
                                                                       capsys, command):
    """Catches a reader that lets MLMD create its schema (it fails on a read-only file only by
    chance of the mode; on MySQL it would succeed): the named error says no MLMD store is
    there, and the database holds the same bytes afterwards."""
    calls = _serving(monkeypatch)
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    before = _digest(other)
    assert cli.main([*command, "--home", str(tmp_path), "--metadata", str(empty)]) == errors.EXIT_STORE
    assert "is empty" in capsys.readouterr().err and empty.read_bytes() == b""
    assert cli.main([*command, "--home", str(tmp_path), "--metadata", str(other)]) == errors.EXIT_STORE
    assert "without an MLMD store" in capsys.readouterr().err
    assert _digest(other) == before and calls == []


def test_a_reader_connection_to_mysql_never_creates_the_database():
    """MLMD's skip_db_creation on readers' MySQL connections; writers (the pipeline) keep it off."""
    reader = connection.connection_config(mysql_host="db", mysql_database="lineage", read_only=True)
    writer = connection.connection_config(mysql_host="db", mysql_database="lineage", read_only=False)
    assert reader.mysql.skip_db_creation and not writer.mysql.skip_db_creation


def test_a_mysql_database_without_mlmd_tables_is_refused_before_mlmd_connects(monkeypatch):
    """check_mysql asks information_schema for MLMD's table; none: the named error, and MLMD's
    MetadataStore (which would create the schema) is never constructed. A fake pymysql stands in
    for the server here (tests/e2e/test_mysql.py runs a real one)."""
    import pymysql
    queries = []

    class Cursor:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def execute(self, sql, args):
            queries.append((sql, args))

        def fetchone(self):
            return (0,)

    class Connection:
        def cursor(self):
            return Cursor()

        def close(self):
            pass

    monkeypatch.setattr(pymysql, "connect", lambda **kw: Connection())
    monkeypatch.setattr(connection.metadata_store, "MetadataStore",
                        lambda config: pytest.fail("MLMD connected to a database with no store"))
    config = connection.connection_config(mysql_host="db", mysql_database="lineage", read_only=True)
    with pytest.raises(errors.MetadataStoreError, match="holds no MLMD store"):
        connection.open_store(config)
    assert queries == [(queries[0][0], ("lineage", connection.MLMD_MARKER_TABLE))]
    assert "information_schema.tables" in queries[0][0]
