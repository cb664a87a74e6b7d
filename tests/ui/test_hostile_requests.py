"""What a hostile page or a hand-typed address can send the UI: ids beyond MLMD's int64 and
malformed run references answer 404 (never a 500 with a traceback); a Host header naming
another site (DNS rebinding) is refused before the store is opened; every answer says nosniff."""

import pytest

from pipeline.lineage.web import app as app_module
from runners.cli import app as cli


@pytest.mark.parametrize("path", [
    "/artifact/12345678901234567890",   # 20 digits
    "/artifact/9223372036854775808",    # int64 max + 1
    "/artifact/99999",                  # in range, not in the store
    "/run/latest~abc",
    "/run/latest~99999999999999999999999",
    "/diff?a=latest~x&b=latest",
])
def test_unknown_or_oversized_ids_are_404(client, path):
    """Catches an id handed to MLMD unchecked (its 'Value out of range' ValueError is a 500)."""
    response = client.get(path)
    assert response.status_code == 404, response.get_data(as_text=True)[-500:]
    assert "Traceback" not in response.get_data(as_text=True)


def test_lineage_trace_of_an_oversized_id_is_the_named_error(ui_home, capsys):
    from components.common import errors
    code = cli.main(["lineage", "trace", "12345678901234567890", "--home", str(ui_home)])
    assert code == errors.NotFoundError.exit_code
    assert "no artifact with id 12345678901234567890" in capsys.readouterr().err


def test_every_answer_says_nosniff_and_logs_are_plain_text(client):
    for path in ("/", "/run/run-a", "/run/run-a/log", "/artifact/1", "/artifact/99999", "/models"):
        assert client.get(path).headers["X-Content-Type-Options"] == "nosniff", path
    assert client.get("/run/run-a/log").mimetype == "text/plain"


def test_loopback_names_with_the_port_are_answered(open_lineage):
    app = app_module.create_app(open_lineage, [], hosts=app_module.allowed_hosts("127.0.0.1", 8080))
    client = app.test_client()
    for host in ("127.0.0.1:8080", "localhost:8080", "[::1]:8080", "LOCALHOST:8080"):
        assert client.get("/", headers={"Host": host}).status_code == 200, host


def test_other_hosts_are_refused_before_the_store_is_opened(open_lineage):
    """A rebinding attacker's name, a loopback name on another port, an empty Host: 421 and the
    store never opened. Catches a missing or a too-loose Host check (e.g. on the name only)."""
    opened = []
    app = app_module.create_app(lambda: opened.append(1) or open_lineage(), [],
                                hosts=app_module.allowed_hosts("127.0.0.1", 8080))
    client = app.test_client()
    for host in ("evil.example:8080", "evil.example", "127.0.0.1.evil.example:8080",
                 "localhost:8081", ""):
        response = client.get("/", headers={"Host": host})
        assert response.status_code == 421, host
        assert "--allow-host" in response.get_data(as_text=True)
    assert opened == []


def test_allow_host_names_a_proxy_name(open_lineage):
    hosts = app_module.allowed_hosts("127.0.0.1", 8080, ["Lineage.Example.org", "other.example:9"])
    client = app_module.create_app(open_lineage, [], hosts=hosts).test_client()
    assert client.get("/", headers={"Host": "lineage.example.org"}).status_code == 200
    assert client.get("/", headers={"Host": "lineage.example.org:443"}).status_code == 200
    assert client.get("/", headers={"Host": "other.example:9"}).status_code == 200
    assert client.get("/", headers={"Host": "other.example:10"}).status_code == 421


def test_cli_passes_allow_host_and_refuses_a_malformed_one(monkeypatch, ui_home, capsys):
    from components.common import errors
    calls = []
    monkeypatch.setattr("pipeline.lineage.web.app.serve",
                        lambda open_lineage, roots, host, port, **kw: calls.append(kw))
    assert cli.main(["ui", "--home", str(ui_home), "--allow-host", "a.example",
                     "--allow-host", "b.example:8443"]) == 0
    assert calls[0]["allow_hosts"] == ["a.example", "b.example:8443"]
    assert cli.main(["ui", "--home", str(ui_home), "--allow-host", "http://x/"]) == errors.EXIT_CONFIG
    assert "--allow-host 'http://x/'" in capsys.readouterr().err
