"""W&B's offline runs read back with W&B's own reader: the `.wandb` record files under
<dir>/wandb/offline-run-*-<id>-<phase>/ scanned with wandb.sdk.internal.datastore.DataStore, each
record parsed as wandb.proto's Record (what `wandb sync` uploads)."""

from __future__ import annotations

import glob
import json
import os


def records(wandb_dir: str, run_id: str):
    """(record type, record) of every phase's file of run `run_id`, oldest phase first."""
    from wandb.proto import wandb_internal_pb2
    from wandb.sdk.internal import datastore
    files = sorted(glob.glob(os.path.join(wandb_dir, "wandb", f"offline-run-*-{run_id}*",
                                          f"run-{run_id}.wandb")))
    for path in files:
        store = datastore.DataStore()
        store.open_for_scan(path)
        while (data := store.scan_data()) is not None:
            record = wandb_internal_pb2.Record()
            record.ParseFromString(data)
            yield record.WhichOneof("record_type"), record


def _key(item) -> str:
    return item.key or "/".join(item.nested_key)


def read_run(wandb_dir: str, run_id: str) -> dict:
    """{"history": {name: {step: value}}, "summary": {name: value}, "config": {name: value},
    "tags": [...], "phases": how many offline runs of this id}."""
    out = {"history": {}, "summary": {}, "config": {}, "tags": [], "phases": 0}
    for kind, record in records(wandb_dir, run_id):
        if kind == "run":
            out["phases"] += 1
            out["tags"] += list(record.run.tags)
            out["config"].update({_key(i): json.loads(i.value_json) for i in record.run.config.update})
        elif kind == "history":
            row = {_key(i): json.loads(i.value_json) for i in record.history.item}
            step = row.pop("_step", record.history.step.num)
            for name, value in row.items():
                if not name.startswith("_"):
                    out["history"].setdefault(name, {})[step] = value
        elif kind == "summary":
            out["summary"].update({_key(i): json.loads(i.value_json) for i in record.summary.update})
        elif kind == "config":
            out["config"].update({_key(i): json.loads(i.value_json) for i in record.config.update})
    return out
