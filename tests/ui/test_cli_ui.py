"""`bigtrain ui`: loopback by default; another address only with --allow-remote, with a warning;
a missing store is the named error before any server starts."""

from components.common import errors
from runners import cli


def _serving(monkeypatch):
    calls = []
    monkeypatch.setattr("pipeline.lineage.web.app.serve",
                        lambda open_lineage, home, host, port, **kw: calls.append((host, port, home)))
    return calls


def test_ui_binds_loopback_by_default(monkeypatch, ui_home, capsys):
    calls = _serving(monkeypatch)
    assert cli.main(["ui", "--home", str(ui_home), "--port", "8123"]) == 0
    assert calls == [("127.0.0.1", 8123, str(ui_home))]
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
