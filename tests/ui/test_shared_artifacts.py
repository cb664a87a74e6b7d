"""One artifact shared by many runs (cached re-runs re-emit it): `lineage trace` and the UI's
artifact page say "produced by execution N, reused by K cached runs" with the first and last few,
in a bounded number of lines, and their store calls do not grow with the number of runs (the
11.7 s and 10,018 lines at 10,000 runs). A page (`--page N`, `?page=N`) lists the Nth 50 of
them, so every one can be listed; a page's store calls depend neither on the runs nor on which
page. Store: benchmarks/support/shared_store.py."""

import collections
import re

import pytest

from pipeline.lineage import queries, render
from pipeline.lineage.store import Lineage
from pipeline.lineage.web.app import create_app
from runners.cli import app as cli
from benchmarks.support import shared_store
from benchmarks.support.mlmd import connect

SHARED = ("Pusher", "Trainer", "TextExampleGen")  # the upstream chain of the pushed version


@pytest.fixture(scope="module")
def homes(tmp_path_factory):
    """Stores of 50, 150 and 500 runs."""
    made = {}
    for runs in (50, 150, 500):
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


def test_trace_names_the_execution_that_made_each_artifact_as_its_producer(homes):
    """The producer is run 0's execution of each shared step, never one of the cached runs that
    re-emitted the artifact (the reference: run-00000's executions by type, read from the store
    directly)."""
    store = connect(str(homes[50] / "metadata.sqlite"))
    [first_run] = [c for c in store.get_contexts() if c.name == "run-00000"]
    node = {t.id: t.name.rsplit(".", 1)[-1] for t in store.get_execution_types()}
    made = {node[e.type_id]: e.id for e in store.get_executions_by_context(first_run.id)}
    text, _ = _trace_text(homes[50])
    produced = [int(n) for n in re.findall(r"produced by execution (\d+), reused by", text)]
    assert produced == [made[name] for name in SHARED], text


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


PER_PAGE = queries.PAGE_SIZE


def _page_trace(home, page: int) -> tuple[dict, collections.Counter]:
    store, calls = _counted(home)
    return queries.trace(Lineage(store), shared_store.version_dir(str(home)), page=page), calls


def test_every_reuser_is_listed_once_across_the_pages(homes):
    """Run i's executions are the cached ones of reuse number i: page N names runs
    (N - 1) x 50 + 1 .. N x 50, every step's pages together name each of the 499 once."""
    pages = -(-499 // PER_PAGE)
    named = collections.defaultdict(list)
    for page in range(1, pages + 2):           # one past the last: empty
        result, _ = _page_trace(homes[500], page)
        for step in result["steps"]:
            reuse = step["made_by"]["reused_by"]
            assert (reuse["count"], reuse["page"], reuse["pages"], reuse["per_page"]) == (
                499, page, pages, PER_PAGE)
            runs = [int(e["runs"][0][len("run-"):]) for e in reuse["executions"]]
            assert runs == list(range((page - 1) * PER_PAGE + 1, min(page * PER_PAGE, 499) + 1))
            named[step["artifact_id"]] += runs
    assert len(named) == len(SHARED) and all(v == list(range(1, 500)) for v in named.values())


def test_a_page_costs_the_same_store_calls_whatever_the_runs_and_the_page(homes):
    """Catches a page read by walking every reuser (or the pages before it)."""
    _, first_of_150 = _page_trace(homes[150], 1)
    _, third_of_500 = _page_trace(homes[500], 3)
    assert first_of_150 == third_of_500


def test_cli_trace_page(homes, capsys):
    home = homes[500]
    assert cli.main(["lineage", "trace", shared_store.version_dir(str(home)), "--page", "2",
                     "--home", str(home)]) == 0
    reuse = [line.strip() for line in capsys.readouterr().out.splitlines() if "reused by" in line]
    assert len(reuse) == len(SHARED)
    for line in reuse:
        assert re.match(r"produced by execution \d+, reused by 499 cached runs: page 2 of 10, "
                        r"50 a page: run-00051 \(execution \d+\), ", line), line
        assert [int(n) for n in re.findall(r"run-(\d{5})", line)] == list(range(51, 101))
    with pytest.raises(SystemExit) as usage:
        cli.main(["lineage", "trace", "1", "--page", "0", "--home", str(home)])
    assert usage.value.code == 2 and "pages are numbered 1, 2" in capsys.readouterr().err


def test_trace_down_pages_the_cached_readers(homes):
    """Examples #1: 998 cached readers (StatisticsGen and Trainer of runs 1..499) in 20 pages."""
    store, _ = _counted(homes[500])
    step = queries.trace(Lineage(store), "1", down=True, page=20)["steps"][0]
    cached = step["cached_readers"]
    assert (cached["count"], cached["page"], cached["pages"]) == (998, 20, 20)
    assert [e["runs"][0] for e in cached["executions"]] == [  # readers 951-998: 2 a run
        f"run-{i:05d}" for i in sorted(list(range(476, 500)) * 2)]
    assert (step["used_by_page"]["count"], step["used_by_page"]["pages"], step["used_by"]) == (
        2, 1, [])      # the two that ran (run 0's) are on page 1


def test_artifact_page_pages(homes):
    """?page=3 names runs 101-150 with links to pages 2 and 4; the unpaged page links page 1;
    a page's store calls are those of a page of another store; a bad page is a 404."""
    text, calls = _page(homes[500], "/artifact/1?page=3")
    reused = text.split("reused by 499 cached runs:", 1)[1].split("(page", 1)[0]
    assert [int(n) for n in re.findall(r"run-(\d{5})", reused)] == list(range(101, 151))
    assert "(page 3 of 10, 50 a page; page 2; page 4)" in text
    assert _page(homes[150], "/artifact/1?page=2")[1] == calls     # another page, other runs
    assert _page(homes[150], "/artifact/1?page=1")[1] == _page(homes[500], "/artifact/1?page=1")[1]
    first, _ = _page(homes[500], "/artifact/1")
    assert "all 499, 50 a page" in first and "all 998, 50 a page" in first
    store, _ = _counted(homes[50])
    client = create_app(lambda: Lineage(store), []).test_client()
    for bad in ("0", "-1", "two", "1e3", "99999999999"):
        assert client.get(f"/artifact/1?page={bad}").status_code == 404, bad


def test_the_artifact_pages_graph_reads_no_run_per_execution(homes):
    """MLMD finds an execution's contexts by scanning every association (15 ms each at 10,000
    runs): the page reads them only for the executions it names in text (producer, first and
    last three reusers and cached readers, the readers that ran, the producing run) and links
    the graph's execution nodes to /execution/<id>, which redirects to the run. Before: one read
    per graph node as well (36 reads here)."""
    text, calls = _page(homes[500], "/artifact/1")
    assert calls["GetContextsByExecution"] <= 1 + 6 + 6 + 2 + 1
    store, _ = _counted(homes[500])
    client = create_app(lambda: Lineage(store), []).test_client()
    response = client.get("/execution/2")                     # run 0's StatisticsGen
    assert response.status_code == 302 and response.headers["Location"].endswith("/run/run-00000")
    assert client.get("/execution/999999").status_code == 404
