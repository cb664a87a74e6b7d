"""OpenLineage events from plain stage records (pipeline/lineage/openlineage_events.py): names
from URIs, the facets, FAIL with the error; each event checked against the spec as the installed
client carries it (tests/support/openlineage_spec.py). No TFX, no network."""

import json
import logging
import os

import pytest
from openlineage.client.serde import Serde

from pipeline.lineage import openlineage_events as ol
from runners import openlineage_emit
from tests.support.openlineage_spec import SpecError, check_run_event

RUN = ol.RunRecord("20260101T000000.000001", "bigtrain", config_digest="0123456789abcdef")
EXAMPLES = ol.DatasetRecord("/home/h/pipelines/bigtrain/TextExampleGen/examples/7", "Examples",
                            {"sequences_train": 40, "sequences_eval": 9, "seq_len": 64})
MODEL = ol.DatasetRecord("s3://bucket/root/Trainer/model/9", "Model",
                         {"loss": 2.5, "steps": 10, "kind": "gpt", "flag": True})


def as_json(event) -> dict:
    return json.loads(Serde.to_json(event))


@pytest.mark.parametrize("uri, expected", [
    ("/a/b/c", ("file", "/a/b/c")),
    ("file:///a/b", ("file", "/a/b")),
    ("s3://bucket/root/Trainer/model/9", ("s3://bucket", "root/Trainer/model/9")),
    ("gs://b/x/y/", ("gs://b", "x/y")),
])
def test_names_follow_the_naming_spec(uri, expected):
    assert ol.dataset_name(uri) == expected


def test_a_complete_stage_is_start_then_complete_with_its_facets():
    stage = ol.StageRecord("Trainer", "complete", 1_000, 5_000, inputs=(EXAMPLES,), outputs=(MODEL,))
    start, complete = [as_json(e) for e in ol.stage_events(RUN, stage)]
    for event in (start, complete):
        check_run_event(event)
        assert event["job"] == {**event["job"], "namespace": "bigtrain", "name": "bigtrain.Trainer"}
        assert event["run"]["runId"] == ol.run_uuid(RUN, "Trainer") != ol.run_uuid(RUN)
        assert event["run"]["facets"]["parent"]["run"]["runId"] == ol.run_uuid(RUN)
        assert event["inputs"][0]["name"] == EXAMPLES.uri
        assert event["inputs"][0]["facets"]["schema"]["fields"][0]["name"] == "input_ids"
        assert event["inputs"][0]["inputFacets"]["inputStatistics"]["rowCount"] == 49
        assert (event["outputs"][0]["namespace"], event["outputs"][0]["name"]) == (
            "s3://bucket", "root/Trainer/model/9")
    assert (start["eventType"], complete["eventType"]) == ("START", "COMPLETE")
    assert start["eventTime"].startswith("1970-01-01T00:00:01")
    facet = complete["run"]["facets"]["bigtrain"]
    assert facet["figures"] == {"loss": 2.5, "steps": 10} and facet["configDigest"] == "0123456789abcdef"
    assert facet["_schemaURL"] == ol.FACET_SCHEMA_URL and facet["_producer"] == ol.PRODUCER


def test_examples_written_carry_their_row_count_when_complete():
    stage = ol.StageRecord("TextExampleGen", "cached", 1, 2, outputs=(EXAMPLES,))
    start, complete = [as_json(e) for e in ol.stage_events(RUN, stage)]
    assert "outputStatistics" not in start["outputs"][0].get("outputFacets", {})
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 49
    check_run_event(complete)


def test_a_failed_stage_ends_in_fail_naming_the_error():
    stage = ol.StageRecord("TextExampleGen", "failed", 1, 2, error="ValueError: split 'eval' "
                           "received no sequences", stack_trace="Traceback ...")
    events = [as_json(e) for e in ol.stage_events(RUN, stage)]
    assert [e["eventType"] for e in events] == ["START", "FAIL"]
    check_run_event(events[1])
    error = events[1]["run"]["facets"]["errorMessage"]
    assert error["message"] == "ValueError: split 'eval' received no sequences"
    assert error["programmingLanguage"] == "PYTHON" and error["stackTrace"] == "Traceback ..."


def test_the_parent_run_has_the_same_id_in_every_process():
    start = as_json(ol.pipeline_event(RUN, ol.RunState.START, 0))
    fail = as_json(ol.pipeline_event(ol.RunRecord(RUN.run_id, "bigtrain"), ol.RunState.FAIL, 1, "boom"))
    assert start["run"]["runId"] == fail["run"]["runId"] == ol.run_uuid(RUN)
    assert fail["run"]["facets"]["errorMessage"]["message"] == "boom"
    check_run_event(start), check_run_event(fail)


@pytest.mark.parametrize("spoil", [
    lambda e: e["run"].pop("runId"),
    lambda e: e["run"].update(runId="not-a-uuid"),
    lambda e: e.update(eventTime="2026-01-01"),
    lambda e: e["run"]["facets"]["parent"].update(_schemaURL="https://x/ParentRunFacet.json"),
    lambda e: e["run"]["facets"]["bigtrain"].update(configDigest="xyz"),
    lambda e: e["run"]["facets"]["bigtrain"].pop("_producer"),
    lambda e: e["inputs"][0]["facets"]["schema"].update(fields="input_ids"),
    lambda e: e["job"].update(title="extra"),
])
def test_the_spec_check_refuses_a_spoiled_event(spoil):
    stage = ol.StageRecord("Trainer", "complete", 1, 2, inputs=(EXAMPLES,), outputs=(MODEL,))
    event = as_json(ol.stage_events(RUN, stage)[1])
    spoil(event)
    with pytest.raises(SpecError):
        check_run_event(event)


class _Refusing:
    class transport:
        kind = "http"

    def __init__(self):
        self.tries = 0

    def emit(self, event):
        self.tries += 1
        raise ConnectionError("connection refused")

    def close(self, timeout):
        return True


def test_a_refusing_transport_warns_once_and_sends_no_more(caplog):
    client = _Refusing()
    emitter = openlineage_emit.Emitter(client)
    with caplog.at_level(logging.WARNING, logger="bigtrain.openlineage"):
        emitter.emit(ol.stage_events(RUN, ol.StageRecord("Trainer", "complete", 1, 2)))
        emitter.emit([ol.pipeline_event(RUN, ol.RunState.COMPLETE, 3)])
    assert client.tries == 1 and emitter.failed
    assert [r.getMessage() for r in caplog.records if "OpenLineageNotSent" in r.getMessage()] == [
        caplog.records[0].getMessage()]
    assert "START event of job bigtrain.Trainer" in caplog.records[0].getMessage()


def test_a_client_leaves_the_environment_as_it_was(monkeypatch, tmp_path):
    """OpenLineageClient() copies OPENLINEAGE_URL into OPENLINEAGE__TRANSPORT__* of os.environ
    for good. Caught on the old code (seen in CI: a later test of the same process found a client
    configured with nothing set): a second emitter after OPENLINEAGE_URL is unset still had a
    client, and one after it changed still sent to the first URL."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in [k for k in os.environ if k.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OPENLINEAGE_URL", "http://127.0.0.1:9")
    first = openlineage_emit.Emitter()
    assert first.client is not None
    assert not [k for k in os.environ if k.startswith("OPENLINEAGE__")]
    monkeypatch.setenv("OPENLINEAGE_URL", "http://127.0.0.1:10")
    assert openlineage_emit.Emitter().client.transport.url == "http://127.0.0.1:10"
    monkeypatch.delenv("OPENLINEAGE_URL")
    assert openlineage_emit.Emitter().client is None


def test_nothing_configured_means_no_client(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("OPENLINEAGE_URL", "OPENLINEAGE_CONFIG", "OPENLINEAGE_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    assert openlineage_emit.Emitter().client is None
    monkeypatch.setenv("OPENLINEAGE_URL", "http://127.0.0.1:9")
    assert openlineage_emit.configured()
    monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")
    assert not openlineage_emit.configured()
    monkeypatch.delenv("OPENLINEAGE_DISABLED")
    monkeypatch.delenv("OPENLINEAGE_URL")
    (tmp_path / "openlineage.yml").write_text("transport:\n  type: console\n")
    assert openlineage_emit.configured()


def test_two_runs_have_their_own_ids_and_each_runs_events_share_one():
    """Issue 57 (10): a run id that left out the run's own id (two runs sharing ids) passed every
    fast test. Two runs of one pipeline: every event of a run carries that run's id (the pipeline
    event's, and as the parent of each stage's), its stages' ids differ from each other's, and
    no id of one run appears in the other's events."""
    second = ol.RunRecord("20260101T000000.000002", "bigtrain", config_digest="0123456789abcdef")

    def ids(run):
        stages = [ol.StageRecord(node, "complete", 1, 2) for node in ("TextExampleGen", "Trainer")]
        events = [as_json(e) for s in stages for e in ol.stage_events(run, s)]
        events.append(as_json(ol.pipeline_event(run, ol.RunState.COMPLETE, 3)))
        parents = {e["run"]["facets"]["parent"]["run"]["runId"] for e in events[:-1]}
        own = {e["run"]["runId"] for e in events}
        return parents, own

    parents_a, own_a = ids(RUN)
    parents_b, own_b = ids(second)
    assert parents_a == {ol.run_uuid(RUN)} and parents_b == {ol.run_uuid(second)}
    assert len(own_a) == len(own_b) == 3             # the pipeline run and two stages, each its own
    assert not (own_a | parents_a) & (own_b | parents_b)
