"""OpenLineage from a real `bigtrain run` (issue 42, items 3 and 4): an HTTP endpoint on
127.0.0.1 (a ThreadingHTTPServer in this process) configured through OPENLINEAGE_URL receives
the run's events. Every stage sends START then COMPLETE, each event valid as far as the installed
client carries the spec (tests/support/openlineage_spec.py), their datasets the URIs that
`bigtrain lineage trace` shows; a stage that fails sends FAIL naming its error; an endpoint that
is down costs the run one warning, not its outcome."""

import logging
import os

import pytest

from tests.e2e.conftest import SMALL_RUN

from tests.support.pipeline_run import lineage_json, run_cli
from tests.support.corpora import _tiny_corpus
from tests.support.openlineage_spec import Receiver, check_run_event, dataset_uris, stage_events

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def receiver():
    server = Receiver()
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("OPENLINEAGE_URL", server.url)
    monkeypatch.delenv("OPENLINEAGE_DISABLED", raising=False)
    monkeypatch.delenv("OPENLINEAGE_CONFIG", raising=False)
    yield server
    monkeypatch.undo()
    server.close()


@pytest.fixture(scope="module")
def lineage_run(receiver, tmp_path_factory, session_capsys):
    corpus = str(tmp_path_factory.mktemp("olcorpus"))
    for sub in "ab":
        os.makedirs(os.path.join(corpus, sub))
    _tiny_corpus(corpus)
    home = str(tmp_path_factory.mktemp("olhome"))
    run = run_cli(session_capsys, home, "--set", f"data.input={corpus}", *SMALL_RUN)
    run.events = [body for _, body in receiver.events]
    run.paths = {path for path, _ in receiver.events}
    return run


def test_every_stage_sends_schema_valid_start_and_complete(lineage_run, session_capsys):
    assert lineage_run.exit_code == 0, lineage_run.stdout + lineage_run.stderr
    assert lineage_run.paths == {"/api/v1/lineage"}
    for event in lineage_run.events:
        check_run_event(event)
    per_stage = stage_events(lineage_run.events, lineage_run.run_id)
    stages = [e for events in per_stage.values() for e in events]
    by_stage = {stage: [e["eventType"] for e in events] for stage, events in per_stage.items()}
    stage_names = {s for s in lineage_run.states() if not s.endswith("resolver")}  # no stages
    assert set(by_stage) == stage_names and len(stage_names) >= 8, (by_stage, stage_names)
    assert all(types == ["START", "COMPLETE"] for types in by_stage.values()), by_stage
    parent = [e["eventType"] for e in lineage_run.events if e["job"]["name"] == "bigtrain"]
    assert parent == ["START", "COMPLETE"], parent
    trainer = next(e for e in stages if e["job"]["name"] == "bigtrain.Trainer"
                   and e["eventType"] == "COMPLETE")
    facet = trainer["run"]["facets"]["bigtrain"]
    assert "eval_loss" in facet["figures"] and len(facet["configDigest"]) == 16, facet
    examples = next(e for e in stages if e["job"]["name"] == "bigtrain.TextExampleGen"
                    and e["eventType"] == "COMPLETE")["outputs"][0]
    assert examples["outputFacets"]["outputStatistics"]["rowCount"] > 0
    assert examples["facets"]["schema"]["fields"][0]["name"] == "input_ids"


def test_datasets_name_the_uris_of_lineage_trace(lineage_run, session_capsys):
    """Up from the pushed model: each step's artifact is an output of its producer's COMPLETE
    event and the producer's inputs are that event's inputs, URI for URI."""
    stages = {stage: events[-1] for stage, events
              in stage_events(lineage_run.events, lineage_run.run_id).items()
              if events[-1]["eventType"] == "COMPLETE"}
    store = lineage_run.store()
    pushed = max(a.id for a in store.get_artifacts_by_type("PushedModel"))
    trace = lineage_json(session_capsys, lineage_run.home, "trace", str(pushed))
    assert len(trace["steps"]) >= 5, trace
    for step in trace["steps"]:
        made_by = step["made_by"]
        if not made_by or made_by["node"] not in stages:
            continue
        event = stages[made_by["node"]]
        assert step["uri"] in dataset_uris(event, "outputs"), (step["uri"], event["outputs"])
        inputs = {a.uri for a in store.get_artifacts_by_id(
            [i for ids in made_by["inputs"].values() for i in ids])}
        assert inputs == dataset_uris(event, "inputs"), (made_by["node"], inputs, event["inputs"])


def test_a_failed_stage_sends_fail_naming_the_error(receiver, tmp_path, capfd):
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "a.txt").write_bytes(b"only one document here\n")
    before = len(receiver.events)
    run = run_cli(capfd, str(tmp_path / "home"), "--set", f"data.input={corpus}",
                  "--set", "data.seq_len=16")
    assert run.exit_code != 0
    events = [body for _, body in receiver.events[before:]]
    for event in events:
        check_run_event(event)
    failed = [e for e in events if e["eventType"] == "FAIL"]
    assert {e["job"]["name"] for e in failed} == {"bigtrain.TextExampleGen", "bigtrain"}, failed
    for event in failed:
        message = event["run"]["facets"]["errorMessage"]["message"]
        assert "split 'eval' received no sequences" in message, message


def test_an_endpoint_that_is_down_costs_one_warning(tmp_path, capfd, monkeypatch):
    """The same failing data stage with OPENLINEAGE_URL on a closed port: the run's own outcome
    and one OpenLineageNotSent warning, read from the records of the `bigtrain.openlineage`
    logger itself (a handler on the root logger, as caplog's, is dropped when the run sets its
    logging up)."""
    down = Receiver()
    down.close()
    monkeypatch.setenv("OPENLINEAGE_URL", down.url)
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "a.txt").write_bytes(b"only one document here\n")
    records = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger = logging.getLogger("bigtrain.openlineage")
    logger.addHandler(handler)
    try:
        run = run_cli(capfd, str(tmp_path / "home"), "--set", f"data.input={corpus}",
                      "--set", "data.seq_len=16")
    finally:
        logger.removeHandler(handler)
    assert "split 'eval' received no sequences" in run.stderr
    warnings = [r.getMessage() for r in records]
    assert len(warnings) == 1 and warnings[0].startswith("OpenLineageNotSent"), warnings
