"""One artifact shared by many runs (cached re-runs re-emit it): `lineage trace` and the UI's
artifact page say "produced by execution N, reused by K cached runs" with the first and last few,
in a bounded number of lines, and their store calls do not grow with the number of runs (the
11.7 s and 10,018 lines at 10,000 runs). Store: tests/support/shared_store.py."""

import collections
import re

import pytest

from pipeline.lineage import queries, render
from pipeline.lineage.store import Lineage
from pipeline.lineage.web.app import create_app
from runners import cli
from tests.support import shared_store
from tests.support.mlmd import connect

SHARED = ("Pusher", "Trainer", "TextExampleGen")  # the upstream chain of the pushed version


@pytest.fixture(scope="module")
def homes(tmp_path_factory):
    """Stores of 50 and 500 runs."""
    made = {}
    for runs in (50, 500):
        made[runs] = tmp_path_factory.mktemp(f"shared{runs}")
        shared_store.build(str(made[runs]), runs)
    return made


def _counted(home):
    """A Lineage on home's store and a Counter of its MLMD calls by method."""
    store = connect(str(home / "metadata.sqlite"))
    calls, call = collections.Counter(), store._call
    store._call = lambda name, *args, **kw: calls.update([name]) or call(name, *args, **kw)
    return store, calls


def _trace_text(home, down: bool = False, target=None) -> tuple[str, collections.Counter]:
    store, calls = _counted(home)
    result = queries.trace(Lineage(store), target or shared_store.version_dir(str(home)), down=down)
    return render.trace_text(result), calls


def _check_trace(text: str, runs: int) -> None:
    """Every shared step named once with its producer and the count of the cached runs, the
    first and last three of them named (the reference: run i's executions are cached)."""
    reuse = [line.strip() for line in text.splitlines() if "reused by" in line]
    assert len(reuse) == len(SHARED)
    for line in reuse:
        assert re.fullmatch(rf"produced by execution \d+, reused by {runs - 1} cached runs: "
                            r"(run-\d{5} \(execution \d+\), ){3}\.\.\., (run-\d{5} \(execution "
                            r"\d+\), ){2}run-\d{5} \(execution \d+\)", line), line
        named = re.findall(r"run-(\d{5})", line)
        assert [int(n) for n in named] == [1, 2, 3, runs - 3, runs - 2, runs - 1]
    assert len(text.splitlines()) <= 15
    assert "validated: ExampleAnomalies #3: anomalies" in text  # run 0's validation, found once


@pytest.mark.parametrize("runs", [50, 500])
def test_trace_collapses_reuse(homes, runs):
    text, _ = _trace_text(homes[runs])
    _check_trace(text, runs)


def test_trace_store_calls_do_not_grow_with_the_runs(homes):
    """Catches any read per reusing execution (each cached StatisticsGen's outputs were read)."""
    (_, small), (_, large) = _trace_text(homes[50]), _trace_text(homes[500])
    assert small == large


def test_trace_down_counts_cached_readers(homes):
    """Examples (#1) is read by StatisticsGen and Trainer in run 0 and by both, cached, in each
    later run: two readers that ran, 2 x 499 cached."""
    text, calls = _trace_text(homes[500], down=True, target="1")
    assert "used by 998 cached executions (re-used outputs, nothing ran): run-00001" in text
    assert "used by StatisticsGen (execution 2, complete)" in text
    assert len(text.splitlines()) <= 30
    assert _trace_text(homes[50], down=True, target="1")[1] == calls


def _page(home, path: str) -> tuple[str, collections.Counter]:
    store, calls = _counted(home)
    response = create_app(lambda: Lineage(store), []).test_client().get(path)
    assert response.status_code == 200
    return re.sub(r"<[^>]+>", "", response.get_data(as_text=True)), calls


@pytest.mark.parametrize("artifact_id", [1, 4, 5])
def test_artifact_page_collapses_reuse_with_calls_independent_of_runs(homes, artifact_id):
    text, calls = _page(homes[500], f"/artifact/{artifact_id}")
    assert "reused by 499 cached runs" in text and text.count("run-0") < 40
    assert _page(homes[50], f"/artifact/{artifact_id}")[1] == calls


def test_cli_trace_prints_the_collapsed_chain(homes, capsys):
    home = homes[50]
    assert cli.main(["lineage", "trace", shared_store.version_dir(str(home)),
                     "--home", str(home)]) == 0
    _check_trace(capsys.readouterr().out, 50)


@pytest.mark.slow
def test_ten_thousand_runs_sharing_one_set_of_artifacts(tmp_path):
    shared_store.build(str(tmp_path), 10_000)
    text, calls = _trace_text(tmp_path)
    _check_trace(text, 10_000)
    small = tmp_path / "small"
    shared_store.build(str(small), 50)
    assert _trace_text(small)[1] == calls
    assert _page(tmp_path, "/artifact/1")[1] == _page(small, "/artifact/1")[1]
