"""The tables and graph links of `bigtrain ui`'s pages, cell by cell, against the lineage package
(queries, report: what `bigtrain lineage` prints) and, for the graph links, against MLMD's own
events. Each test names the deletion or mistake in a template it catches."""

import time
import urllib.parse

from bs4 import BeautifulSoup
import pytest

from pipeline.lineage import queries, report, run_diff

pytestmark = pytest.mark.usefixtures("ui_home")


def _tree(client, url: str):
    response = client.get(url)
    assert response.status_code == 200, url
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def _rows(tree, table_selector: str) -> list[list[str]]:
    """The text of each cell of each row but the header row."""
    (table,) = tree.select(table_selector)
    return [[cell.get_text().strip() for cell in row.select("td")]
            for row in table.select("tr") if row.select("td")]


def _fig(value) -> str:
    """The reference formatting of a figure: 4 significant digits, '-' when missing."""
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def test_runs_page_columns_match_list_runs(client, open_lineage):
    """Catches a deleted or swapped column among start, duration, why it ran, eval loss,
    bits/byte, pushed version and tracker runs (or a run's row showing another run's figures)."""
    expected = [[r["run_id"], r["state"],
                 time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["start_ms"] / 1000)),
                 f"{r['duration_s']:.1f} s", r["why"] or "", _fig(r["eval_loss"]),
                 _fig(r["bits_per_byte"]), r["pushed_version"] or "-",
                 " ".join(f"{k}:{v}" for k, v in sorted(r["trackers"].items()))]
                for r in queries.list_runs(open_lineage())]
    assert _rows(_tree(client, "/"), "table#runs") == expected
    assert {row[4] for row in expected} == {"first run", "config changed: train.train_steps"}
    assert [row[7] for row in expected] == ["-", "2", "1"] and expected[1][5] == "2.3"
    assert [row[8] for row in expected] == ["", "", "mlflow:0a1b2c wandb:run-a"]


@pytest.mark.parametrize("run_id", ["run-a", "latest~1", "run-c"])
def test_run_page_stages_table_matches_the_run_report(client, open_lineage, run_id):
    """Stage, state, seconds and the cache reason ('why it ran') of each stage equal the run
    report's. Catches a deleted why column or a stage shown with another's state."""
    lin = open_lineage()
    rep = report.run_report(lin.store, lin.run(run_id).name, lineage=lin)
    rows = _rows(_tree(client, f"/run/{run_id}"), "table#stages")
    assert [r[:3] + [r[4]] for r in rows] == [[s.node, s.state, f"{s.duration_s:.1f}", s.why]
                                              for s in rep.stages]


def test_every_stage_state_is_drawn_and_tabled(client):
    """complete, cached (run-b's StatisticsGen), failed and abandoned (run-c's Trainer and
    ExampleValidator) appear in the DAG's node labels and the stages table. Catches a state
    lost between the store and the page (abandoned read as canceled, cached as complete)."""
    labels, states = {}, {}
    for run_id in ("latest~1", "run-c"):
        tree = _tree(client, f"/run/{run_id}")
        labels[run_id] = {t.get_text() for t in tree.select("svg.graph a > title")}
        states[run_id] = {row[0]: row[1] for row in _rows(tree, "table#stages")}
    assert {"StatisticsGen (cached)", "Trainer (complete)"} <= labels["latest~1"]
    assert {"Trainer (failed)", "ExampleValidator (abandoned)"} <= labels["run-c"]
    assert states["latest~1"]["StatisticsGen"] == "cached"
    assert (states["run-c"]["Trainer"], states["run-c"]["ExampleValidator"]) == ("failed", "abandoned")


def test_artifact_properties_table_matches_the_artifact_record(client, open_lineage):
    """Catches a deleted or truncated properties table (every property, formatted)."""
    lin = open_lineage()
    for artifact in lin.store.get_artifacts():
        props = queries.artifact_record(lin, artifact.id, full=True)["properties"]
        rows = _rows(_tree(client, f"/artifact/{artifact.id}"), "table#properties")
        assert rows == [[k, _fig(v)] for k, v in sorted(props.items())], artifact.id
    assert any(len(queries.artifact_record(lin, a.id, full=True)["properties"]) > 5
               for a in lin.store.get_artifacts())


def _neighbours(store, artifact_id: int, depth: int = 3) -> set[int]:
    """The reference: artifacts within `depth` hops up (producer, its inputs) and down
    (consumers, their outputs) of artifact_id, read from MLMD's events directly."""
    from ml_metadata.proto import metadata_store_pb2 as pb
    outputs = (pb.Event.OUTPUT, pb.Event.DECLARED_OUTPUT)
    found = {artifact_id}
    for up in (True, False):
        frontier = {artifact_id}
        for _ in range(depth):
            events = store.get_events_by_artifact_ids(sorted(frontier))
            executions = {e.execution_id for e in events if (e.type in outputs) == up}
            step = store.get_events_by_execution_ids(sorted(executions)) if executions else []
            frontier = {e.artifact_id for e in step if (e.type in outputs) != up}
            found |= frontier
    return found


def test_artifact_graph_nodes_link_to_real_neighbours(client, open_lineage):
    """Every artifact node of the lineage graph links to /artifact/<id> of an artifact within
    three hops (MLMD's events say which), all of them are drawn, and execution nodes link to
    /execution/<id>, which redirects to a run that holds them. Catches a node linking to the wrong id (its execution's, a shifted
    one) or a graph that drops a neighbour."""
    lin = open_lineage()
    model = lin.inputs(lin.producer(lin.store.get_artifacts_by_type("PushedModel")[-1].id))["model"][0]
    tree = _tree(client, f"/artifact/{model}")
    hrefs = [a.get("href") for a in tree.select("svg.graph a")]
    linked = {int(h.rsplit("/", 1)[1]) for h in hrefs if h.startswith("/artifact/")}
    assert linked == _neighbours(lin.store, model)
    executions = [h for h in hrefs if h.startswith("/execution/")]
    assert executions and len(executions) + len(linked) == len(hrefs)
    for href in executions:   # each redirects to a run that holds the execution
        target = client.get(href).headers["Location"]
        run_id = urllib.parse.unquote(target.rsplit("/run/", 1)[1])
        holds = [e.id for e in lin.executions_of(lin.run(run_id))]
        assert int(href.rsplit("/", 1)[1]) in holds, (href, run_id)
    for href in hrefs:
        assert client.get(href, follow_redirects=True).status_code == 200, href


def test_diff_page_metrics_and_data_rows_match_lineage_diff(client, open_lineage):
    """Catches a deleted metrics table or data (fingerprint) rows, or a/b columns swapped."""
    d = run_diff.diff(open_lineage(), "run-a", "latest~1")
    tree = _tree(client, "/diff?a=run-a&b=latest~1")
    assert _rows(tree, "table.diff-metrics") == [[m["name"], _fig(m["a"]), _fig(m["b"])]
                                                 for m in d["metrics"]]
    data = _rows(tree, "table.diff-data")
    assert data == [[m["name"], _fig(m["a"]), _fig(m["b"])] for m in d["inputs"]]
    fingerprint = next(r for r in data if r[0] == "input_fingerprint")
    assert fingerprint[1] == "fp-run-a" and fingerprint[2].startswith("fp-run-b")
    assert ["ModelEvaluation.loss", "2.5", "2.3"] in _rows(tree, "table.diff-metrics")
