"""`bigtrain ui` reads files only inside the store's artifact folders (<home>/runs and the
pipeline root): a ModelRun URI or run log outside them, a symlink inside them pointing out, or
the home's own metadata.sqlite is refused with a 404 page and never opened."""

import os

import pytest

from benchmarks.support.mlmd import connect
from pipeline.lineage.store import Lineage
from pipeline.lineage.web import app as app_module
from runners.local.home import readable_folders
from benchmarks.support import lineage_store


@pytest.fixture()
def home(tmp_path):
    """A synthetic home of its own (its URIs name it), and a folder outside it holding curves."""
    copy = tmp_path / "home"
    lineage_store.build(str(copy))
    lineage_store.write_curves(str(tmp_path / "outside" / "model_run"))
    return copy


def _set_uri(home, run_id: str, type_name: str, uri: str) -> None:
    """Point run_id's artifact of type_name at uri (a store written by hand, as an attacker or a
    moved home would leave it)."""
    store = connect(str(home / "metadata.sqlite"), read_only=False)
    run = store.get_context_by_type_and_name("pipeline_run", run_id)
    (artifact,) = [a for a in store.get_artifacts_by_context(run.id)
                   if store.get_artifact_types_by_id([a.type_id])[0].name == type_name]
    artifact.uri = uri
    store.put_artifacts([artifact])


def _set_log(home, run_id: str, log: str) -> None:
    store = connect(str(home / "metadata.sqlite"), read_only=False)
    run = store.get_context_by_type_and_name("pipeline_run", run_id)
    run.custom_properties["bigtrain_log"].string_value = log
    store.put_contexts([run])


def _client(home, monkeypatch):
    """The app over home, with read_scalars recording what it is asked to read."""
    read = []
    original = app_module.curves.read_scalars
    monkeypatch.setattr(app_module.curves, "read_scalars",
                        lambda folder: read.append(folder) or original(folder))
    app = app_module.create_app(lambda: Lineage(connect(str(home / "metadata.sqlite"))),
                                readable_folders(str(home)))
    return app.test_client(), read


def test_curves_of_a_model_run_inside_the_pipeline_root_are_read(home, monkeypatch):
    """The control: the guard lets the run's own ModelRun folder through."""
    client, read = _client(home, monkeypatch)
    response = client.get("/run/run-a/curves")
    assert response.status_code == 200 and response.get_data(as_text=True).count("<svg") == 5   # loss, validation, lr, tokens/s, MFU
    assert len(read) == 1 and read[0].startswith(os.path.realpath(home / "pipelines"))


def test_curves_refuse_a_model_run_outside_the_home(home, tmp_path, monkeypatch):
    """Catches a curves route that trusts the ModelRun URI MLMD holds."""
    _set_uri(home, "run-a", "ModelRun", str(tmp_path / "outside" / "model_run"))
    client, read = _client(home, monkeypatch)
    response = client.get("/run/run-a/curves")
    assert response.status_code == 404 and "outside the store&#39;s artifact folders" in \
        response.get_data(as_text=True)
    assert read == []


def test_curves_refuse_a_symlink_inside_the_home_pointing_out(home, tmp_path, monkeypatch):
    """Catches a guard that compares the URI as written instead of its realpath."""
    link = home / "pipelines" / "run-a" / "model_run_link"
    os.symlink(tmp_path / "outside" / "model_run", link)
    _set_uri(home, "run-a", "ModelRun", str(link))
    client, read = _client(home, monkeypatch)
    assert client.get("/run/run-a/curves").status_code == 404
    assert read == []


def test_the_store_itself_and_the_home_root_are_not_artifact_folders(home, monkeypatch):
    """A run log naming metadata.sqlite and a ModelRun URI naming the home are refused: the
    boundary is <home>/runs and the pipeline root, not the home. Catches a guard widened back to
    the home (which would serve the whole MLMD database as a 'log')."""
    _set_log(home, "run-a", str(home / "metadata.sqlite"))
    _set_uri(home, "run-a", "ModelRun", str(home))
    client, read = _client(home, monkeypatch)
    response = client.get("/run/run-a/log")
    assert response.status_code == 404 and b"SQLite format 3" not in response.get_data()
    assert client.get("/run/run-a/curves").status_code == 404 and read == []
    assert client.get("/run/run-c/log").get_data(as_text=True) == "log of run-c\n"


def test_a_pipeline_root_elsewhere_is_an_artifact_folder(home, tmp_path, monkeypatch):
    """orchestrator.pipeline_root outside the home (bigtrain ui passes it): its ModelRun folders
    are read; the home's own pipelines folder then is not."""
    root = tmp_path / "outside"
    _set_uri(home, "run-a", "ModelRun", str(root / "model_run"))
    folders = readable_folders(str(home), str(root))
    assert folders == [os.path.realpath(home / "runs"), os.path.realpath(root)]
    app = app_module.create_app(lambda: Lineage(connect(str(home / "metadata.sqlite"))),
                                folders)
    client = app.test_client()
    assert client.get("/run/run-a/curves").get_data(as_text=True).count("<svg") == 3
    assert client.get("/run/latest~1/curves").status_code == 404


def test_a_sibling_folder_sharing_the_roots_prefix_is_outside(home, monkeypatch):
    """<home>/runs-evil/ starts with the string <home>/runs but is not inside it: a log there is
    refused. Catches a guard that compares path prefixes (startswith) instead of folders."""
    sibling = home / "runs-evil"
    sibling.mkdir()
    (sibling / "run.log").write_text("secret next door\n")
    _set_log(home, "run-a", str(sibling / "run.log"))
    client, _ = _client(home, monkeypatch)
    response = client.get("/run/run-a/log")
    assert response.status_code == 404 and b"secret next door" not in response.get_data()
