"""`bigtrain ui`: loopback by default; another address only with --allow-remote, with a warning;
a missing store is the named error before any server starts."""

from components.common import errors
from runners.cli import app as cli
from runners.local.home import LocalPaths, readable_folders


def _serving(monkeypatch):
    calls = []
    monkeypatch.setattr("pipeline.lineage.web.app.serve",
                        lambda open_lineage, roots, host, port, **kw: calls.append((host, port, roots)))
    return calls


def _home_folders(home) -> list[str]:
    """What the UI of a home may read: its run logs and its (default) pipeline root."""
    return readable_folders(str(home), LocalPaths.for_home(str(home), "bigtrain").pipeline_root)


def test_ui_binds_loopback_by_default(monkeypatch, ui_home, capsys):
    calls = _serving(monkeypatch)
    assert cli.main(["ui", "--home", str(ui_home), "--port", "8123"]) == 0
    assert calls == [("127.0.0.1", 8123, _home_folders(ui_home))]
    assert "WARNING" not in capsys.readouterr().err


def test_ui_refuses_a_network_address_without_allow_remote(monkeypatch, ui_home, capsys):
    calls = _serving(monkeypatch)
    assert cli.main(["ui", "--home", str(ui_home), "--host", "0.0.0.0"]) == errors.EXIT_CONFIG
    assert calls == [] and "--allow-remote" in capsys.readouterr().err
    assert cli.main(["ui", "--home", str(ui_home), "--host", "0.0.0.0", "--allow-remote"]) == 0
    assert calls[0][0] == "0.0.0.0" and "WARNING" in capsys.readouterr().err


def test_ui_on_a_missing_store_is_the_named_store_error(monkeypatch, tmp_path, capsys):
    calls = _serving(monkeypatch)
    assert cli.main(["ui", "--home", str(tmp_path)]) == errors.EXIT_STORE
    assert calls == [] and "no metadata database" in capsys.readouterr().err


def test_ui_with_a_host_name_is_a_named_usage_error(monkeypatch, ui_home, capsys):
    """`--host example.org` was a ValueError traceback from ipaddress; now the config error
    (exit code 2) naming the flag, and no server starts."""
    calls = _serving(monkeypatch)
    for host in ("example.org", "my-laptop"):
        assert cli.main(["ui", "--home", str(ui_home), "--host", host]) == errors.EXIT_CONFIG
        err = capsys.readouterr().err
        assert f"--host '{host}' is not an IP address" in err and "Traceback" not in err
    assert calls == []
    assert cli.main(["ui", "--home", str(ui_home), "--host", "localhost"]) == 0
    assert calls == [("localhost", 8080, _home_folders(ui_home))]


def test_lineage_runs_pages_by_default(tmp_path, capsys):
    """`lineage runs` prints the newest 20 runs unless --limit says otherwise (0: all). The
    reference: the store's run contexts, newest first. Catches a default that prints the whole
    history (the 2.9 s at 3,000 runs of issue 22) or a --limit ignored."""
    import json
    from ml_metadata.proto import metadata_store_pb2 as pb
    from benchmarks.support.mlmd import connect
    from benchmarks.support import lineage_store
    home = tmp_path / "home"
    lineage_store.build(str(home))
    store = connect(str(home / "metadata.sqlite"), read_only=False)
    run_type = store.get_context_type("pipeline_run").id
    store.put_contexts([pb.Context(type_id=run_type, name=f"run-{i:02d}") for i in range(22)])
    everything = sorted(store.get_contexts_by_type("pipeline_run"),
                        key=lambda c: (c.create_time_since_epoch, c.id), reverse=True)
    names = [c.name for c in everything]
    assert len(names) == 25

    def runs(*flags):
        capsys.readouterr()
        assert cli.main(["lineage", "runs", "--home", str(home), "--json", *flags]) == 0
        return [r["run_id"] for r in json.loads(capsys.readouterr().out)]

    assert runs() == names[:20]
    assert runs("--limit", "5") == names[:5]
    assert runs("--limit", "0") == names
    capsys.readouterr()
    assert cli.main(["lineage", "runs", "--home", str(home)]) == 0
    assert len([line for line in capsys.readouterr().out.splitlines() if line.startswith("run-")]) == 20


def test_why_of_a_run_that_recorded_no_log_shows_the_homes_run_log(tmp_path, capsys):
    """Issue 41: a run killed -9 records its log in MLMD only when a later run sweeps it;
    meanwhile `lineage why` said `log: None` although <home>/runs/<id>/run.log was there."""
    import json
    from benchmarks.support.mlmd import connect
    from benchmarks.support import lineage_store
    from pipeline.lineage import record
    home = tmp_path / "home"
    lineage_store.build(str(home))
    store = connect(str(home / "metadata.sqlite"), read_only=False)
    run = store.get_context_by_type_and_name("pipeline_run", "run-c")
    for name in (record.RUN_LOG, record.RUN_DIR):
        del run.custom_properties[name]
    store.put_contexts([run])
    capsys.readouterr()
    assert cli.main(["lineage", "why", "run-c", "--home", str(home), "--json"]) == 0
    why = json.loads(capsys.readouterr().out)
    log = str(home / "runs" / "run-c" / "run.log")
    assert why["log"] == log and why["run_dir"] == str(home / "runs" / "run-c")
    assert why["failed"] and all(f["log"] == log for f in why["failed"])
