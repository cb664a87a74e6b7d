"""TokenizerGen: the stage function on a real corpus, its errors, its cache key (settings, input
fingerprint, code digest) and the component run by TFX with the Tokenizer artifact in MLMD."""

import dataclasses
import json
import os
import sys

import pytest

from components.storage import digest
from components.tokenizer import artifact, base, stage, training
from components.tokenizer.component import tokenizer_code_digest
from components.tokenizer.training import TokenizerTrainingError
from components import config as config_lib
from components.config import MIN_SENTENCEPIECE_VOCAB, Config, ConfigError, DataConfig, build_config


def data_config(root, **changes):
    return dataclasses.replace(DataConfig(input=root, exclude=(), eval_fraction=0.2), **changes)


def test_sentencepiece_stage_on_a_corpus(corpus, tmp_path):
    root, quarantined = corpus
    data = data_config(root, tokenizer="sentencepiece", vocab_size=500,
                       tokenizer_sample_bytes=40_000)
    tokenizer, figures = stage.build_tokenizer(data, str(tmp_path))
    assert figures["vocab_size"] == tokenizer.vocab_size == 500
    assert figures["sample_bytes"] == 40_000           # the budget, filled exactly
    assert figures["train_bytes_seen"] > 40_000
    assert figures["documents_skipped"] == len(quarantined)  # binary, latin-1, dangling, empty
    assert 1.3 < figures["bytes_per_token"] < 5.0       # subwords: fewer tokens than bytes
    assert figures["eval_sample_tokens"] * figures["bytes_per_token"] == pytest.approx(
        figures["eval_sample_bytes"], rel=1e-5)
    loaded = artifact.load(str(tmp_path))
    assert loaded.encode("def f(x):\n").tolist() == tokenizer.encode("def f(x):\n").tolist()
    description = json.loads((tmp_path / base.DESCRIPTION_FILE).read_text(encoding="utf-8"))
    assert description["figures"] == figures
    # Same input, same settings: the same model, byte for byte.
    again, _ = stage.build_tokenizer(data, str(tmp_path / "again"))
    assert again.model_proto == tokenizer.model_proto


def test_byte_stage_has_one_byte_per_token(corpus, tmp_path):
    tokenizer, figures = stage.build_tokenizer(data_config(corpus[0]), str(tmp_path))
    assert tokenizer.kind == "bytes" and figures["vocab_size"] == 259
    assert figures["bytes_per_token"] == 1.0 and figures["training_seconds"] == 0.0
    assert sorted(os.listdir(tmp_path)) == [base.DESCRIPTION_FILE]


def test_no_text_in_the_input(tmp_path):
    (tmp_path / "empty.py").write_bytes(b"")
    (tmp_path / "image.bin").write_bytes(b"\x89PNG\x00\x00")
    data = data_config(str(tmp_path), tokenizer="sentencepiece")
    with pytest.raises(TokenizerTrainingError, match="training sample has no text"):
        stage.build_tokenizer(data, str(tmp_path / "out"))


def test_vocab_size_too_large_for_the_sample_names_both_settings(corpus, tmp_path):
    data = data_config(corpus[0], tokenizer="sentencepiece", vocab_size=20_000,
                       tokenizer_sample_bytes=20_000)
    with pytest.raises(TokenizerTrainingError, match=r"data\.vocab_size=20000 is larger than the "
                       r"training sample supports.*data\.tokenizer_sample_bytes"):
        stage.build_tokenizer(data, str(tmp_path))


def test_config_settings_and_validation():
    config = build_config("tiny", overrides=["data.tokenizer=sentencepiece",
                                             "data.vocab_size=3000",
                                             "data.tokenizer_model_type=unigram"])
    assert (config.data.tokenizer, config.data.vocab_size, config.data.tokenizer_model_type) == (
        "sentencepiece", 3000, "unigram")
    assert build_config("tiny").data.tokenizer == "bytes"
    for override, message in [("data.tokenizer=wordpiece", r"data\.tokenizer: 'wordpiece'"),
                              ("data.tokenizer_model_type=char", r"data\.tokenizer_model_type"),
                              ("data.tokenizer_sample_bytes=0", r"data\.tokenizer_sample_bytes"),
                              ("data.vocab_size=260", r"data\.vocab_size \(260\) is below the "
                                                      r"byte-fallback minimum 261")]:
        with pytest.raises(ConfigError, match=message):
            build_config("tiny", overrides=["data.tokenizer=sentencepiece", override])
    with pytest.raises(ConfigError, match=r"data\.tokenizer=sentencepiece needs raw input"):
        build_config("tiny", overrides=["data.tokenizer=sentencepiece", "data.format=tfrecord"])
    assert config_lib.MIN_SENTENCEPIECE_VOCAB == training.MIN_VOCAB_SIZE  # one rule, two places
    # The byte tokenizer ignores a valid data.vocab_size (its vocabulary is fixed); a value no
    # SentencePiece model can have is an error whatever the tokenizer (issue 41's vocab_size=1).
    assert build_config("tiny", overrides=["data.vocab_size=5000"]).data.vocab_size == 5000
    for value in (1, 0, -3, MIN_SENTENCEPIECE_VOCAB - 1):
        with pytest.raises(ConfigError, match=rf"data\.vocab_size \({value}\) is below the "
                           r"byte-fallback minimum 261 .*data\.tokenizer=bytes ignores it"):
            build_config("tiny", overrides=[f"data.vocab_size={value}"])
    assert build_config("tiny", overrides=[f"data.vocab_size={MIN_SENTENCEPIECE_VOCAB}"])


def test_cache_key_holds_only_the_tokenizer_settings():
    from components.config import Config, stages
    from components.tokenizer.component import TOKENIZER_READS

    def tokenizer_settings_json(data):
        return stages.handoff(TOKENIZER_READS, Config(data=data))["tokenizer_config"]
    data = DataConfig(tokenizer="sentencepiece")
    assert tokenizer_settings_json(data) == tokenizer_settings_json(
        dataclasses.replace(data, seq_len=512, train_shards=9, gzip_level=6))
    for change in ({"vocab_size": 4000}, {"tokenizer": "bytes"},
                   {"tokenizer_model_type": "unigram"}, {"tokenizer_sample_bytes": 1},
                   {"eval_fraction": 0.5}, {"input": "/elsewhere"}, {"document": "separator"},
                   {"max_document_bytes": 10}):
        assert tokenizer_settings_json(data) != tokenizer_settings_json(
            dataclasses.replace(data, **change)), change


def test_code_digest_follows_the_source(tmp_path, monkeypatch):
    package = tmp_path / "digestpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "rules.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = digest.code_digest("digestpkg")
    assert digest.code_digest("digestpkg") == first
    (package / "rules.py").write_text("X = 2\n")
    assert digest.code_digest("digestpkg") != first
    sys.modules.pop("digestpkg", None)
    assert len(tokenizer_code_digest()) == 64


@pytest.mark.slow
def test_tokenizer_gen_in_a_pipeline_records_the_artifact_and_caches(corpus, tmp_path):
    """TokenizerGen under LocalDagRunner: a Tokenizer artifact with its figures as MLMD
    properties; an identical re-run is cached; a new vocab_size re-runs it."""
    from ml_metadata.proto import metadata_store_pb2
    from tfx.orchestration import metadata
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner
    from tfx.orchestration.pipeline import Pipeline

    from components.storage.listing import fingerprint_input
    from components.tokenizer.component import TokenizerGen

    db = str(tmp_path / "metadata.sqlite")

    def run(vocab_size):
        data = data_config(corpus[0], tokenizer="sentencepiece", vocab_size=vocab_size,
                           tokenizer_sample_bytes=40_000)
        LocalDagRunner().run(Pipeline(
            pipeline_name="tok", pipeline_root=str(tmp_path / "root"),
            components=[TokenizerGen(Config(data=data), input_fingerprint=fingerprint_input(data))],
            enable_cache=True,
            metadata_connection_config=metadata.sqlite_metadata_connection_config(db)))

    run(400)
    run(400)
    run(450)
    from benchmarks.support.mlmd import connect
    store = connect(db)
    artifacts = store.get_artifacts_by_type("Tokenizer")
    assert sorted(a.properties["vocab_size"].int_value for a in artifacts) == [400, 450]
    art = artifacts[0]
    assert art.properties["kind"].string_value == "sentencepiece"
    assert art.properties["model_type"].string_value == "bpe"
    assert art.properties["bytes_per_token"].double_value > 1.3
    assert art.properties["sample_bytes"].int_value == 40_000
    assert os.path.exists(art.properties["model_file"].string_value)
    assert art.properties["code_digest"].string_value == tokenizer_code_digest()
    states = [e.last_known_state for e in store.get_executions()]
    assert states.count(metadata_store_pb2.Execution.CACHED) == 1
    assert states.count(metadata_store_pb2.Execution.COMPLETE) == 2
