"""MLMD on a real MySQL server (the MariaDB `make test` starts: tests/support/mariadb.sh). The
pipeline runs with `metadata.backend=mysql`, and every `bigtrain lineage` question gets the same
answers as on the shared sqlite home for the same runs (first run, then an identical forced re-run;
on MySQL with a one-block model trained 10 steps, CHEAPER_MODEL: the answers compared are
shapes, stage states and the data stage's counters, which the model's size does not change).
Skips only when MariaDB could not be installed outside CI (the reason is printed); in CI a missing
server fails."""

import json
import os
import shutil
import subprocess

import pytest

from components.common import errors
from runners.cli import app as cli
from tests.e2e.conftest import ONE_DEVICE, base_args
from tests.support.pipeline_run import run_cli
from tests.support.mlmd import mysql_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def mysql(tmp_path_factory):
    env = mysql_server()
    database = f"bigtrain_test_{os.getpid()}"
    info = {"host": env["BIGTRAIN_TEST_MYSQL_HOST"], "port": env["BIGTRAIN_TEST_MYSQL_PORT"],
            "user": env["BIGTRAIN_TEST_MYSQL_USER"], "password": env["BIGTRAIN_TEST_MYSQL_PASSWORD"],
            "database": database, "home": str(tmp_path_factory.mktemp("mysql_home"))}
    os.environ["BIGTRAIN_METADATA_PASSWORD"] = info["password"]
    yield info
    client = shutil.which("mariadb") or shutil.which("mysql")
    if client:  # leave the server as it was
        subprocess.run([client, "-h", info["host"], "-P", info["port"], "-u", info["user"],
                        f"-p{info['password']}", "-e", f"DROP DATABASE IF EXISTS {database}"],
                       capture_output=True)


def run_settings(mysql) -> list[str]:
    return ["--set", "metadata.backend=mysql", "--set", f"metadata.mysql_host={mysql['host']}",
            "--set", f"metadata.mysql_port={mysql['port']}", "--set", f"metadata.mysql_user={mysql['user']}",
            "--set", f"metadata.mysql_database={mysql['database']}"]


def lineage_flags(mysql) -> list[str]:
    uri = f"mysql://{mysql['user']}@{mysql['host']}:{mysql['port']}/{mysql['database']}"
    return ["--metadata", uri, "--home", mysql["home"]]


# What the MySQL runs change from data_run's command: a one-block model trained 10 steps and
# evaluated on 2 batches of 8 (the same int8 and TFLite variants: their figures are MLMD
# properties the lineage answers list), with a threshold it meets, so it is blessed and pushed.
# The answers compared below are shapes (artifact types, producers, property names, edges), stage
# states and the data stage's counters, none of which depends on the model's size or training;
# the data settings are data_run's, so the examples and their counters are the same.
CHEAPER_MODEL = ["--set", "model.n_layer=1", "--set", "train.train_steps=10",
                 "--set", "train.warmup_steps=2", "--set", "train.checkpoint_every=5",
                 "--set", "train.eval_batches=2", "--set", "eval.max_batches=2",
                 "--set", "eval.batch_size=8", "--set", "eval.max_loss=10", *ONE_DEVICE]


def mysql_args(mysql, corpus_root) -> list[str]:
    return [*base_args(corpus_root), *CHEAPER_MODEL, *run_settings(mysql)]


@pytest.fixture(scope="session")
def mysql_runs(mysql, identical_run, corpus, session_capsys):
    """The commands of data_run and identical_run (--force) with a cheaper model (CHEAPER_MODEL),
    on MySQL."""
    first = run_cli(session_capsys, mysql["home"], *mysql_args(mysql, corpus[0]), mysql=mysql)
    second = run_cli(session_capsys, mysql["home"], *mysql_args(mysql, corpus[0]), "--force",
                     mysql=mysql)
    return first, second


def ask(capsys, *argv):
    capsys.readouterr()
    code = cli.main(["lineage", *argv, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def shape_of_trace(result):
    return [(s["type"], s["depth"], (s.get("made_by") or {}).get("node"),
             sorted(s["properties"]), (s.get("raw_input") or {}).get("fingerprint"))
            for s in result["steps"]]


def shape_of_graph(result):
    label = lambda n: n["label"].split(" #")[0] if n["kind"] == "artifact" else n["label"]
    ids = {n["id"]: label(n) for n in result["nodes"]}
    return sorted(ids.values()), sorted((ids[e["from"]], ids[e["to"]], e["label"]) for e in result["edges"])


def test_pipeline_runs_on_mysql_with_the_same_lineage_answers(mysql, mysql_runs, data_run,
                                                              identical_run, capsys):
    first, second = mysql_runs
    assert first.exit_code == 0 and second.exit_code == 0, (first.stderr, second.stderr)
    assert not os.path.exists(os.path.join(mysql["home"], "metadata.sqlite"))  # all in MySQL
    sqlite = ["--home", data_run.home]
    my = lineage_flags(mysql)

    # runs: the same stage states, newest first (sqlite's home also holds later runs: compare the two)
    runs_my = ask(capsys, "runs", *my)
    runs_sq = {r["run_id"]: r for r in ask(capsys, "runs", *sqlite)}
    assert [r["stages"] for r in runs_my] == [runs_sq[identical_run.run_id]["stages"],
                                              runs_sq[data_run.run_id]["stages"]]
    assert [r["state"] for r in runs_my] == ["complete", "complete"]

    # trace up from the pushed model: the same chain of artifacts, producers, properties, raw input
    pushed_my = runs_my[1]["pushed_version"]
    assert pushed_my is not None
    version_my = os.path.join(mysql["home"], "serving", "gpt", pushed_my)
    version_sq = os.path.join(data_run.home, "serving", "gpt", str(max(data_run.served_after)))
    assert shape_of_trace(ask(capsys, "trace", version_my, *my)) == \
        shape_of_trace(ask(capsys, "trace", version_sq, *sqlite))

    # trace down from the Examples: the same executions use them
    down = lambda run, flags: ask(capsys, "trace", str(run.report().stage("TextExampleGen")
                                                       .outputs["Examples"]["id"]), "--down", *flags)
    # (the sqlite home holds later runs that trained more models on the same examples: compare
    # who uses the examples directly)
    used_by = lambda result: sorted({u["node"] for u in result["steps"][0]["used_by"]})
    down_my = down(first, my)
    assert used_by(down_my) == used_by(down(data_run, sqlite))
    assert len(down_my["models"]) == 1  # one model trained, the forced re-run was cached

    # diff of the two runs: the same stage states and (no) parameter changes
    diff_my = ask(capsys, "diff", runs_my[1]["run_id"], runs_my[0]["run_id"], *my)
    diff_sq = ask(capsys, "diff", data_run.run_id, identical_run.run_id, *sqlite)
    for key in ("stages", "config", "data_changed", "code_changed"):
        assert diff_my[key] == diff_sq[key], key
    assert [m["name"] for m in diff_my["metrics"]] == [m["name"] for m in diff_sq["metrics"]]

    # graph of each run: the same nodes and edges (ids aside)
    assert shape_of_graph(ask(capsys, "graph", runs_my[1]["run_id"], *my)) == \
        shape_of_graph(ask(capsys, "graph", data_run.run_id, *sqlite))

    # why: neither run failed
    assert ask(capsys, "why", "latest", *my)["failed"] == []

    # the data stage is deterministic: identical counters through either store
    examples = lambda run: {k: v for k, v in run.report().stage("TextExampleGen").outputs["Examples"].items()
                            if k.startswith(("files_", "sequences_", "tokens_", "bytes_"))}
    assert examples(first) == examples(data_run)


def test_up_to_date_check_reads_mysql(mysql, mysql_runs, corpus, session_capsys):
    run = run_cli(session_capsys, mysql["home"], *mysql_args(mysql, corpus[0]), mysql=mysql)
    assert run.exit_code == 0 and "run UP TO DATE" in run.stdout, run.stderr


def test_readers_never_create_an_mlmd_store_on_mysql(monkeypatch, capsys):
    """`bigtrain lineage` and `bigtrain ui` on a database that does not exist, and on one that
    exists but is empty: the named store error (exit code 5), and afterwards the database is
    still missing / still has no table (MLMD, connected, would have created its schema). Catches
    a reader connection without connection.check_mysql or with MLMD's database creation on.
    Needs no pipeline run (no shared fixture)."""
    import pymysql
    env = mysql_server()
    host, port = env["BIGTRAIN_TEST_MYSQL_HOST"], int(env["BIGTRAIN_TEST_MYSQL_PORT"])
    user, password = env["BIGTRAIN_TEST_MYSQL_USER"], env["BIGTRAIN_TEST_MYSQL_PASSWORD"]
    monkeypatch.setenv("BIGTRAIN_METADATA_PASSWORD", password)
    monkeypatch.setattr("pipeline.lineage.web.app.serve", lambda *a, **kw: pytest.fail("served"))
    missing, empty = f"bigtrain_missing_{os.getpid()}", f"bigtrain_empty_{os.getpid()}"
    admin = pymysql.connect(host=host, port=port, user=user, password=password, autocommit=True)

    def tables(database):
        with admin.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = %s",
                           (database,))
            if not cursor.fetchone()[0]:
                return None
            cursor.execute("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s",
                           (database,))
            return cursor.fetchone()[0]

    with admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {empty}")
    try:
        for command in (["lineage", "runs"], ["ui"]):
            for database in (missing, empty):
                uri = f"mysql://{user}@{host}:{port}/{database}"
                capsys.readouterr()
                assert cli.main([*command, "--metadata", uri]) == errors.EXIT_STORE, (command, database)
                assert "holds no MLMD store" in capsys.readouterr().err
        assert tables(missing) is None and tables(empty) == 0
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {empty}")
            cursor.execute(f"DROP DATABASE IF EXISTS {missing}")
        admin.close()
