"""One synthetic store per session (benchmarks/support/lineage_store.py: three runs, a fine-tuned model,
a Tuner, a failed Trainer), with '<script>' in a run name and an artifact property."""

import pytest

from benchmarks.support import lineage_store

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="session")
def ui_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("ui_home")
    lineage_store.build(str(home), hostile=HOSTILE)
    return home


@pytest.fixture(scope="session")
def open_lineage(ui_home):
    from pipeline.lineage.store import Lineage
    from benchmarks.support.mlmd import connect
    return lambda: Lineage(connect(str(ui_home / "metadata.sqlite")))


@pytest.fixture()
def client(open_lineage, ui_home):
    from pipeline.lineage.web.app import create_app
    from runners.local.home import readable_folders
    return create_app(open_lineage, readable_folders(str(ui_home))).test_client()
