"""Every route of `bigtrain ui` against the synthetic store, with the Flask test client: the pages
show what the lineage queries answer, escape every MLMD string, read no file outside the home,
answer 404 for unknown ids and a named error page for a damaged store."""

import os
import re
import shutil

from pipeline.lineage import explore, queries, run_diff
from pipeline.lineage.web.app import create_app
from runners.local.home import readable_folders
from tests.ui.conftest import HOSTILE


def _text(response) -> str:
    return response.get_data(as_text=True)


def test_runs_page_names_every_run_as_lineage_runs_does(client, open_lineage):
    """The ids on / are exactly list_runs' ids (what `lineage runs` prints), newest first, with
    state, pushed version and eval loss. Catches a page that reads runs its own way."""
    page = _text(client.get("/"))
    expected = [r["run_id"] for r in queries.list_runs(open_lineage())]
    shown = [m for m in re.findall(r'class="run-id" href="[^"]*">([^<]*)<', page)]
    assert [s.replace("&lt;", "<").replace("&gt;", ">") for s in shown] == expected
    assert "failed" in page and "2.3" in page  # run-c failed; run-b's eval loss


def test_runs_filter_and_paging(client):
    failed = _text(client.get("/?state=failed"))
    assert "run-c" in failed and "run-a" not in failed
    first = _text(client.get("/?limit=1"))
    assert "run-c" in first and "run-a" not in first and 'rel="next"' in first
    last = _text(client.get("/?limit=1&offset=2"))
    assert "run-a" in last and 'rel="next"' not in last
    assert client.get("/?state=bogus").status_code == 404


def test_run_page_has_dag_stages_counters_trials_and_log(client):
    page = _text(client.get("/run/latest~1"))  # run-b
    assert "<svg" in page and "Trainer (complete)" in page
    assert "Pusher" in page and "documents_packed" in page and "300" in page
    assert 'id="trials"' in page and "(best)" in page
    assert "/run/" in page and "/log" in page
    failed = _text(client.get("/run/run-c"))
    assert "TrainingDiverged" in failed and "loss diverged &lt;b&gt;" in failed


def test_run_log_is_served_from_the_home(client):
    response = client.get("/run/run-a/log")
    assert response.status_code == 200 and _text(response) == "log of run-a\n"


def test_artifact_page_walks_up_to_raw_input_and_fine_tuned_from(client, open_lineage):
    lin = open_lineage()
    pushed = explore.pushed_model(lin, "latest~1")
    page = _text(client.get(f"/artifact/{pushed['Model']['id']}"))
    assert 'id="fine-tuned-from"' in page  # run-b's model is fine-tuned from run-a's
    assert "input-tokenizer" in page and "input-examples" in page
    examples = lin.inputs(lin.producer(pushed["Model"]["id"]))["examples"][0]
    raw = _text(client.get(f"/artifact/{examples}"))
    assert 'id="raw-input"' in raw and "/data/corpus/*.txt" in raw


def test_models_page_lists_pushed_versions_with_blessing_and_variants(client):
    page = _text(client.get("/models"))
    assert page.count('class="pushed"') == 2 and "blessed: loss ok" in page
    assert "int8" in page and "1.0 MB" in page


def test_diff_page_matches_lineage_diff(client, open_lineage):
    d = run_diff.diff(open_lineage(), "run-a", "latest~1")
    page = _text(client.get("/diff?a=run-a&b=latest~1"))
    assert "data changed" in page
    for row in d["config"]:
        assert row["key"] in page


def test_curves_page_draws_the_logged_scalars(client):
    """run-a logs MFU, run-b does not. Catches a curve dropped (MFU's tag not read) or drawn
    from nothing."""
    page = _text(client.get("/run/run-a/curves"))
    assert re.findall(r"<figcaption>([^<]*)</figcaption>", page) == [
        "loss", "validation loss (train.eval_every)", "learning rate", "tokens/s", "MFU"]
    assert page.count("<svg") == 5 and "not logged by this run" not in page
    page = _text(client.get("/run/latest~1/curves"))
    assert page.count("<svg") == 3
    assert "not logged by this run: validation loss (train.eval_every), MFU" in page


def test_every_mlmd_string_is_escaped(client):
    """A run name and an artifact property hold '<script>': every page shows them as text.
    Catches a |safe or Markup() on MLMD strings."""
    pages = [_text(client.get(u)) for u in ("/", "/models", "/run/latest~1", "/artifact/16",
                                            "/diff?a=run-a&b=latest~1")]
    assert any("&lt;script&gt;alert(1)&lt;/script&gt;" in p for p in pages)
    assert all(HOSTILE not in p for p in pages)


def test_unknown_ids_are_404_pages(client):
    for url in ("/run/no-such-run", "/artifact/999999", "/run/no-such-run/curves", "/nowhere"):
        response = client.get(url)
        assert response.status_code == 404 and "<h1>" in _text(response), url


def test_a_key_error_in_a_page_is_a_500_not_a_404(open_lineage, ui_home, monkeypatch):
    """Only the store's named NotFoundError is a 'not found' page: a KeyError from a query is a
    bug and answers 500. Catches an errorhandler(LookupError) that shows bugs as 404s."""
    def broken_page(lin, **kwargs):
        return {}["no-such-key"]
    monkeypatch.setattr(queries, "runs_page", broken_page)
    response = create_app(open_lineage, str(ui_home)).test_client().get("/")
    assert response.status_code == 500


def test_no_route_reads_outside_the_home(tmp_path, ui_home):
    """A run whose recorded log points outside the home (or climbs out with ..) is not served;
    traversal in the URL finds no route. Catches a log route that trusts MLMD's path."""
    from pipeline.lineage.store import Lineage
    from benchmarks.support.mlmd import connect
    home = tmp_path / "home"
    shutil.copytree(ui_home, home)
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    rw = connect(str(home / "metadata.sqlite"), read_only=False)
    for name, log in (("run-a", str(secret)), ("run-c", str(home / ".." / "secret.txt"))):
        run = rw.get_context_by_type_and_name("pipeline_run", name)
        run.custom_properties["bigtrain_log"].string_value = log
        rw.put_contexts([run])
    app = create_app(lambda: Lineage(connect(str(home / "metadata.sqlite"))),
                     readable_folders(str(home)))
    client = app.test_client()
    for url in ("/run/run-a/log", "/run/run-c/log", "/run/..%2F..%2Fsecret.txt/log",
                "/run/../../secret.txt"):
        response = client.get(url)
        assert response.status_code == 404 and "secret" != _text(response), url


def test_damaged_store_is_a_named_error_page(tmp_path):
    from pipeline.lineage.store import Lineage
    from benchmarks.support.mlmd import connect
    damaged = tmp_path / "metadata.sqlite"
    damaged.write_bytes(b"this is not sqlite" * 100)
    app = create_app(lambda: Lineage(connect(str(damaged))), readable_folders(str(tmp_path)))
    response = app.test_client().get("/")
    assert response.status_code == 503
    assert "metadata store unusable" in _text(response) and "not an SQLite database" in _text(response)


def test_the_server_never_writes_the_store(client, ui_home):
    before = os.stat(ui_home / "metadata.sqlite").st_mtime_ns
    for url in ("/", "/run/run-a", "/artifact/5", "/models", "/diff?a=run-a&b=run-c"):
        client.get(url)
    assert os.stat(ui_home / "metadata.sqlite").st_mtime_ns == before


def test_mlmd_failing_mid_request_is_diagnosed_as_a_named_error(tmp_path):
    """A store MLMD opens but then fails on (damage past the schema pages) is diagnosed after
    the failure: the page names the damage instead of a 500."""
    from components.common.errors import MetadataStoreError

    def failing():
        raise RuntimeError("Error when executing query: database disk image is malformed")

    def diagnose():
        raise MetadataStoreError("metadata store x is damaged (sqlite quick_check: ...)")

    app = create_app(failing, readable_folders(str(tmp_path)), diagnose)
    response = app.test_client().get("/models")
    assert response.status_code == 503 and "is damaged" in _text(response)


def test_every_run_link_on_the_runs_page_opens_its_run(client):
    """Run ids are MLMD strings: one with '/' and '<' in it still links to its own page."""
    links = re.findall(r'class="run-id" href="([^"]*)"', _text(client.get("/")))
    assert len(links) == 3
    for link in links:
        response = client.get(link.replace("&amp;", "&"))
        assert response.status_code == 200, link
