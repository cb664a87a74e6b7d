"""`bigtrain run --runner PortableRunner --beam-arg=...` reaches TFX's Beam executors: TextExampleGen
and StatisticsGen run on SDK workers from an external worker pool (separate processes) and write
the same shards (byte for byte) and the same statistics as the DirectRunner. Statistics are equal
field by field with floats to 12 significant digits: a mean summed in another order differs in its
last digit (measured: 79.65986954055586 vs 79.659869540555874)."""

import hashlib
import os

import pytest

from runners import cli
from tests.support.beam_worker_pool import worker_pool

pytestmark = pytest.mark.slow

STAGE_FILES = ("TextExampleGen/examples", "StatisticsGen/statistics")


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
                elif name.endswith((".gz", ".jsonl")):
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


def run_until_statistics(home, corpus_root, *beam):
    args = ["run", "--home", str(home), "--until", "StatisticsGen", "--set",
            f"data.input={corpus_root}", "--set", "data.document=separator", *beam]
    assert cli.main(args) == 0


def test_bigtrain_run_on_the_portable_runner_matches_the_direct_runner(corpus, tmp_path):
    """Catches: Beam args not reaching an executor (the pool would start no worker), a stage whose
    output depends on the runner, statistics computed only in the launching process."""
    run_until_statistics(tmp_path / "direct", corpus[0])
    log = tmp_path / "pool.log"
    with worker_pool(str(log)) as (port, _):
        run_until_statistics(tmp_path / "portable", corpus[0], "--runner", "PortableRunner",
                             "--beam-arg=--job_endpoint=embed",
                             "--beam-arg=--environment_type=EXTERNAL",
                             f"--beam-arg=--environment_config=localhost:{port}")
    # One SDK worker process per Beam stage (the embedded job server asks the pool for one).
    assert log.read_text().count("Starting worker with command") == 2
    direct = digest_outputs(tmp_path / "direct")
    assert any(p.endswith("FeatureStats.pb") for p in direct) and any(p.endswith(".gz") for p in direct)
    assert digest_outputs(tmp_path / "portable") == direct
