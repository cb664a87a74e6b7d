"""`bigtrain run --runner PortableRunner --beam-arg=...`, the whole pipeline through the Pusher,
reaches every Beam executor: TokenizerGen (its sample), TextExampleGen and StatisticsGen run on SDK
workers from an external worker pool (separate processes) and write the same SentencePiece model,
shards (byte for byte) and statistics as the DirectRunner; the stages after them (schema,
validation, gate, Trainer, the LanguageModelEvaluator, Pusher) have no Beam part and run in the
launching process on those identical inputs, so the evaluation's figures are equal too. Statistics
are equal field by field with floats to 12 significant digits: a mean summed in another order
differs in its last digit (measured: 79.65986954055586 vs 79.659869540555874)."""

import hashlib
import json
import os

import pytest

from runners.cli import app as cli
from tests.e2e.conftest import sentencepiece_args
from tests.support.beam_worker_pool import worker_pool

pytestmark = pytest.mark.slow

STAGE_FILES = ("TokenizerGen/tokenizer", "TextExampleGen/examples", "StatisticsGen/statistics")


def digest_outputs(home):
    """{path under the pipeline root: sha256 of a shard or manifest, or the statistics}."""
    root = os.path.join(home, "pipelines", "bigtrain")
    out = {}
    for stage in STAGE_FILES:
        for dirpath, _, names in os.walk(os.path.join(root, stage)):
            for name in names:
                path = os.path.join(dirpath, name)
                if name.endswith(".pb"):
                    out[os.path.relpath(path, root)] = statistics(path)
                elif name.endswith((".gz", ".jsonl", ".model")):
                    with open(path, "rb") as fh:
                        out[os.path.relpath(path, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def statistics(path):
    """A FeatureStats.pb as a dict, floats rounded to 12 significant digits."""
    from google.protobuf import json_format
    from tensorflow_metadata.proto.v0 import statistics_pb2

    stats = statistics_pb2.DatasetFeatureStatisticsList()
    with open(path, "rb") as fh:
        stats.ParseFromString(fh.read())
    return rounded(json_format.MessageToDict(stats))


def rounded(value):
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def whole_run(home, corpus_root, *beam):
    assert cli.main(["run", "--home", str(home), *sentencepiece_args(corpus_root), *beam]) == 0


def evaluation(home):
    """The Evaluator's metrics.json and what the Pusher published."""
    root = os.path.join(home, "pipelines", "bigtrain", "LanguageModelEvaluator", "evaluation")
    (run,) = os.listdir(root)
    with open(os.path.join(root, run, "metrics.json")) as fh:
        metrics = json.load(fh)
    from components.push.layout import served_versions
    return metrics, served_versions(os.path.join(home, "serving", "gpt"))


def test_bigtrain_run_on_the_portable_runner_matches_the_direct_runner(corpus, tmp_path,
                                                                       sentencepiece_run):
    """Catches: Beam args not reaching an executor (the pool would start no worker for it), a
    stage whose output depends on the runner, statistics or a sample computed only in the
    launching process, a run that stops before the Pusher on the portable runner."""
    assert sentencepiece_run.exit_code == 0, sentencepiece_run.stderr[-3000:]
    direct_home = sentencepiece_run.home             # the same settings on the DirectRunner
    log = tmp_path / "pool.log"
    with worker_pool(str(log)) as (port, _):
        whole_run(tmp_path / "portable", corpus[0], "--runner", "PortableRunner",
                  "--beam-arg=--job_endpoint=embed", "--beam-arg=--environment_type=EXTERNAL",
                  f"--beam-arg=--environment_config=localhost:{port}")
    # One SDK worker process for the run's probe of the pool (runners/beam/sdk_workers.py), then two
    # per Beam stage (TokenizerGen, TextExampleGen, StatisticsGen): its own probe of the pool,
    # then the worker its Beam job asks for (the embedded job server asks the pool for one).
    assert log.read_text().count("Starting worker with command") == 1 + 3 * 2
    direct = digest_outputs(direct_home)
    assert any(p.endswith("FeatureStats.pb") for p in direct) and any(p.endswith(".gz") for p in direct)
    assert any(p.endswith("tokenizer.model") for p in direct)
    assert digest_outputs(tmp_path / "portable") == direct
    (metrics, pushed), (direct_metrics, direct_pushed) = (evaluation(tmp_path / "portable"),
                                                          evaluation(direct_home))
    assert metrics["blessed"] and len(pushed) == len(direct_pushed) == 1
    assert metrics["candidate"]["tokens"] == direct_metrics["candidate"]["tokens"] > 0
    # Every figure of the model's quality is equal (same shards, same seed: same weights); the
    # timer and the SavedModel's size (it embeds its own path: 5 bytes apart) are not figures of it.
    measured = ("latency_ms", "size_bytes")
    assert {k: v for k, v in rounded(metrics["candidate"]).items() if k not in measured} == {
        k: v for k, v in rounded(direct_metrics["candidate"]).items() if k not in measured}
    assert {"loss", "bits_per_byte", "accuracy", "tokens"} <= set(metrics["candidate"])
