"""Checking an OpenLineage event as JSON against the spec, as far as the installed client carries
it. openlineage-python ships no JSON schema files (its classes are generated from the spec's
JSON schemas, spec/OpenLineage.json and spec/facets/*.json, in the OpenLineage repository), so
the JSON is rebuilt strictly into those generated classes:

- every key of an event, run, job, dataset and known facet must be a field of its generated
  class, every field without a default must be there, every value of the field's type;
- constructing the classes runs the client's own validators (eventTime an ISO date-time with a
  time, runId a UUID, producer and schemaURL URLs);
- each known facet's `_schemaURL` must be the one its generated class names (the spec version the
  client was generated from), and every facet carries `_producer` and `_schemaURL`;
- bigtrain's own facet is validated with jsonschema against schemas/openlineage/BigtrainRunFacet.json.

Not checked: JSON-schema keywords the generated classes do not carry (string formats beyond the
client's validators, `additionalProperties` of facets this module does not know)."""

from __future__ import annotations

import enum
import json
import os
import threading
import types
import typing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import attr
from openlineage.client.event_v2 import RunEvent
from openlineage.client.facet_v2 import (error_message_run, input_statistics_input_dataset,
                                         job_type_job, output_statistics_output_dataset,
                                         parent_run, schema_dataset)

from pipeline.lineage import openlineage_events as ol
from schemas import OPENLINEAGE_FACET, SCHEMA_DIR

KNOWN_FACETS = {
    "parent": parent_run.ParentRunFacet, "errorMessage": error_message_run.ErrorMessageRunFacet,
    "schema": schema_dataset.SchemaDatasetFacet, "jobType": job_type_job.JobTypeJobFacet,
    "inputStatistics": input_statistics_input_dataset.InputStatisticsInputDatasetFacet,
    "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet,
}


class SpecError(AssertionError):
    pass


def _hints(cls) -> dict:
    import sys
    # the generated modules name ClassVar and Any under `from __future__ import annotations`
    return typing.get_type_hints(cls, vars(sys.modules[cls.__module__]),
                                 {"ClassVar": typing.ClassVar, "Any": typing.Any})


def _value(tp, value, where: str):
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        return _value(next(a for a in args if a is not type(None)), value, where)
    if origin is list:
        if not isinstance(value, list):
            raise SpecError(f"{where}: a list expected, got {value!r}")
        return [_value(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise SpecError(f"{where}: an object expected, got {value!r}")
        return {k: _facet(k, v, f"{where}.{k}") if attr.has(args[1]) else _value(args[1], v, f"{where}.{k}")
                for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if attr.has(tp):
        return structure(tp, value, where)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is typing.Any or (isinstance(tp, type) and isinstance(value, tp) and
                            not (tp is int and isinstance(value, bool))):
        return value
    raise SpecError(f"{where}: {tp} expected, got {value!r}")


def _facet(key: str, value: dict, where: str):
    if key == ol.FACET_KEY:
        return check_bigtrain_facet(value, where)
    for required in ("_producer", "_schemaURL"):
        if required not in value:
            raise SpecError(f"{where}: facet without {required}")
    cls = KNOWN_FACETS.get(key)
    if cls is None:
        return value   # a facet the client adds or this module does not know: base keys only
    if value["_schemaURL"] != cls._get_schema():
        raise SpecError(f"{where}: _schemaURL {value['_schemaURL']} is not {cls._get_schema()}")
    return structure(cls, value, where)


def structure(cls, data: dict, where: str = "event"):
    """data rebuilt as cls, strictly (SpecError on an unknown or missing key or a wrong type)."""
    if not isinstance(data, dict):
        raise SpecError(f"{where}: an object expected, got {data!r}")
    fields, hints = {f.name: f for f in attr.fields(cls)}, _hints(cls)
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise SpecError(f"{where}: keys {unknown} are not in the spec's {cls.__name__}")
    kwargs = {}
    for name, field in fields.items():
        if name not in data:
            if field.default is attr.NOTHING:
                raise SpecError(f"{where}: {name} is required in {cls.__name__}")
            continue
        if field.init:
            kwargs[field.alias] = _value(hints[name], data[name], f"{where}.{name}")
    try:
        built = cls(**kwargs)
    except (ValueError, TypeError) as err:
        raise SpecError(f"{where}: {cls.__name__} refuses it: {err}") from err
    return built


def check_bigtrain_facet(value: dict, where: str = "bigtrain facet") -> dict:
    import jsonschema
    with open(os.path.join(SCHEMA_DIR, OPENLINEAGE_FACET), encoding="utf-8") as fh:
        schema = json.load(fh)
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as err:
        raise SpecError(f"{where}: {err.message}") from err
    if value["_schemaURL"] != ol.FACET_SCHEMA_URL:
        raise SpecError(f"{where}: _schemaURL {value['_schemaURL']}")
    return value


def check_run_event(data: dict) -> RunEvent:
    """A received RunEvent's JSON rebuilt as the client's RunEvent (SpecError when it is not one
    the spec allows, as far as the module docstring says)."""
    event = structure(RunEvent, data)
    if data.get("schemaURL") != RunEvent._get_schema():
        raise SpecError(f"schemaURL {data.get('schemaURL')} is not {RunEvent._get_schema()}")
    return event


def stage_events(events: list[dict], run_id: str, pipeline: str = "bigtrain") -> dict[str, list]:
    """{stage: its events, in the order received} of the stages of one pipeline run: the events
    whose parent facet names that run (the parent's own events are left out)."""
    parent = ol.run_uuid(ol.RunRecord(run_id, pipeline))
    by_stage = {}
    for event in events:
        if event["run"]["facets"].get("parent", {}).get("run", {}).get("runId") == parent:
            by_stage.setdefault(event["job"]["name"].split(".", 1)[1], []).append(event)
    return by_stage


def dataset_uris(event: dict, side: str) -> set[str]:
    """The URIs of an event's input or output datasets, rebuilt from (namespace, name)."""
    return {d["name"] if d["namespace"] == "file" else f"{d['namespace']}/{d['name']}"
            for d in event.get(side) or []}


class Receiver:
    """POST bodies received on 127.0.0.1 (the OpenLineage HTTP transport's api/v1/lineage)."""

    def __init__(self):
        received = self.events = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append((self.path, json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
