"""A model card's lineage facts: the data facts TextExampleGen records (one row per raw source,
the counts), and the run that trained a Model found from the Model alone (a push record's model
id, a model folder's URI), so that a card written from a pushed version or a folder carries the
same run id, sources, counts and figures as one written from the run id."""

import json
import os

from components.serving.data_facts import data_facts
from components.serving.hf.card import facts_from_model_info, render_card
from pipeline.lineage.card_facts import card_facts, model_facts
from pipeline.lineage.store import Lineage
from benchmarks.support import lineage_store
from benchmarks.support.mlmd import connect

SOURCES = [{"name": "code", "input": "/data/code/*.py", "root": "/data/code", "format": "text",
            "document": "file", "weight": 2.0, "filters": None, "files": 3, "bytes_listed": 900,
            "documents": {"train": 40, "eval": 2}, "bytes": {"train": 800, "eval": 60},
            "tokens": {"train": 820, "eval": 62}, "unique": {"train": 20, "eval": 2},
            "sampled_out": {"train": 0, "eval": 0}, "epochs": 2.0},
           {"name": "prose", "input": "/data/prose.jsonl", "root": "/data", "format": "jsonl",
            "document": "record", "weight": 1.0, "filters": ["min_chars"], "files": 1,
            "documents": {"train": 10, "eval": 1}, "bytes": {"train": 300, "eval": 30},
            "tokens": {"train": 310, "eval": 31}, "epochs": 1.0}]
EXAMPLES = {"input": "code=/data/code/*.py; prose=/data/prose.jsonl", "format": "jsonl,text",
            "sources": json.dumps(SOURCES), "input_fingerprint": "fp-1", "files_listed": 4,
            "documents_packed": 53, "sequences_train": 12, "source_code_documents_train": 40,
            "real_token_fraction": 0.9}


def test_one_row_per_raw_source_with_its_counts():
    facts = data_facts(EXAMPLES)
    assert [row["name"] for row in facts["data_sources"]] == ["code", "prose"]
    code = facts["data_sources"][0]
    assert (code["input"], code["weight"], code["files"]) == ("/data/code/*.py", 2.0, 3)
    assert (code["documents_train"], code["documents_eval"], code["tokens_train"], code["epochs"]) == (40, 2, 820, 2.0)
    assert facts["data_counts"] == {"documents_packed": 53, "files_listed": 4, "sequences_train": 12}
    assert facts["input_fingerprint"] == "fp-1"
    flat = data_facts({k: v for k, v in EXAMPLES.items() if k != "sources"})["data_sources"]
    assert flat == [{"input": EXAMPLES["input"], "format": "jsonl,text", "files_listed": 4}]


def test_the_model_info_carries_them_into_every_card():
    """What the Trainer writes into MODEL_INFO (run_fn: its Examples' data facts) is on the card
    of a model exported without any store."""
    info = {"config": {"model": {"arch": "llama"}}, "data": data_facts(EXAMPLES),
            "training": {"steps": 5, "eval_bits_per_byte": 2.0, "zlib9_bits_per_byte": 2.5,
                         "lzma9_bits_per_byte": 2.25}}
    card = render_card({"architectures": ["LlamaForCausalLM"]}, facts_from_model_info(info))
    assert "| code | /data/code/*.py | text | file | 2 | 3 | 40 | 2 | 800 |" in card
    assert "| `documents_packed` | 53 |" in card and "| input fingerprint | fp-1 |" in card
    assert "zlib -9 2.500" in card and "| `steps` | 5 |" in card


def store(tmp_path) -> Lineage:
    path = lineage_store.build(str(tmp_path / "home"))
    return Lineage(connect(path))


def test_a_model_is_traced_to_the_run_that_trained_it(tmp_path):
    lin = store(tmp_path)
    record = json.load(open(tmp_path / "home" / "serving" / "gpt" / "2" / "assets.extra" / "bigtrain_push.json"))
    model = lin.artifact(record["model_id"])
    by_id = model_facts(lin, model_id=record["model_id"], model_uri=model.uri)
    by_uri = model_facts(lin, model_uri=model.uri)
    expected = dict(card_facts(lin, "run-b"))
    expected.pop("model_uri")
    assert by_id == by_uri == expected
    assert by_id["run_id"] == "run-b" and by_id["pushed_version"] == "2"
    assert by_id["data_sources"] == [{"input": "/data/corpus/*.txt", "files_listed": 12}]
    assert by_id["data_counts"]["documents_packed"] == 300
    assert by_id["evaluation"]["eval_bits_per_byte"] == 3.6
    assert by_id["evaluation"]["evaluator_float_loss"] == 2.3


def test_a_model_the_store_does_not_hold_has_no_lineage_facts(tmp_path):
    lin = store(tmp_path)
    record = json.load(open(tmp_path / "home" / "serving" / "gpt" / "1" / "assets.extra" / "bigtrain_push.json"))
    assert model_facts(lin, model_id=9999) == {}
    # a push record of another store: the same id names another folder here
    assert model_facts(lin, model_id=record["model_id"], model_uri="/elsewhere/model") == {}
    assert model_facts(lin, model_uri=os.path.join(str(tmp_path), "no-model")) == {}


def test_the_trainer_hands_its_examples_facts_to_run_fn(tmp_path, monkeypatch):
    """run_fn writes them into MODEL_INFO ("data"): the Trainer executor reads them off the
    Examples it trains on and adds them to the custom_config run_fn gets."""
    from tfx.components.trainer.executor import GenericExecutor
    from tfx.types import standard_artifacts
    from components.training import run_fn
    seen = {}
    monkeypatch.setattr(GenericExecutor, "Do", lambda self, i, o, props: seen.update(props))
    examples = standard_artifacts.Examples()
    for name, value in EXAMPLES.items():
        setter = {int: examples.set_int_custom_property, float: examples.set_float_custom_property}
        setter.get(type(value), examples.set_string_custom_property)(name, value)
    model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
    model.uri, model_run.uri = str(tmp_path / "model"), str(tmp_path / "model_run")
    (tmp_path / "model_run").mkdir()
    (tmp_path / "model_run" / run_fn.SUMMARY_FILE).write_text(json.dumps({"steps": 20}))
    run_fn.TrainerExecutor().Do({"examples": [examples]}, {"model": [model], "model_run": [model_run]},
                                {"custom_config": json.dumps({"model": "{}"})})
    custom = json.loads(seen["custom_config"])
    assert json.loads(custom[run_fn.DATA_FACTS]) == data_facts(EXAMPLES)
    assert custom["model"] == "{}"
