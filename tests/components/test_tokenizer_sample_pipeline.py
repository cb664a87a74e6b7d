"""TokenizerGen's sample read in Beam (components/tokenizer/sample_pipeline.py): the transform
against the single-process reader, and the same SentencePiece model bytes on every runner."""

import collections
import os

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from components.tokenizer import base
from components.storage.listing import list_input_files
from components.corpus.documents import content_key
from components.corpus.split_documents import reader_config
from benchmarks.support.single_process import read_split_documents
from tests.support.tokenizer_sample import data_config, make_sample_input
from components.tokenizer import sample_pipeline, sampling, stage

BEAM_ARGS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
TWO_WORKERS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]


@pytest.fixture
def sample_input(corpus, tmp_path):
    return make_sample_input(corpus[0], tmp_path / "input")


def reference(data):
    """The old single-process read (read_split_documents: listing, readers, first-copy dedup,
    content split) and the sample rule written out: sort by key, fill the budget, cut the last."""
    skipped = collections.Counter()
    by_split = collections.defaultdict(list)
    for split, document in read_split_documents(data, skipped):
        by_split[split].append((document.id, document.text))
    outputs = []
    figures = {f"skipped_{reason}": n for reason, n in skipped.items()}
    for split, docs in by_split.items():
        figures[f"documents_seen_{split}"] = len(docs)
        figures[f"bytes_seen_{split}"] = sum(len(text) for _, text in docs)
        ranked = sorted(enumerate(docs), key=lambda d: (
            sampling.sample_key(content_key(d[1][1])), content_key(d[1][1]), d[0]))
        sample, total = [], 0
        for _, (document_id, text) in ranked:
            take = text[:data.tokenizer_sample_bytes - total].decode("utf-8", "ignore")
            if take:
                sample.append((document_id, take))
                total += len(take.encode("utf-8"))
        outputs.append((split, sample))
    return outputs + [("figures", figures)]


@pytest.mark.slow
@pytest.mark.parametrize("dedup", ["exact", "none"])
def test_read_sample_is_the_single_process_sample(sample_input, dedup):
    """Catches: a sample that depends on bundling or unit order, a later copy sampled instead of
    the first (or both under dedup=exact), figures that miss quarantined or duplicate records."""
    data = data_config(sample_input, dedup=dedup, document="separator", separator="\n\n")
    expected = reference(data)
    duplicates = dict(expected)["figures"].get("skipped_duplicate", 0)
    assert duplicates > 100 if dedup == "exact" else duplicates == 0   # all.txt repeats email/
    _, files = list_input_files(data.input, data.exclude)
    units = sample_pipeline.readers.plan_units(files, reader_config(data))
    assert len(units) > 5
    with TestPipeline(options=PipelineOptions(BEAM_ARGS)) as p:
        got = p | sample_pipeline.ReadSample(
            files, config=reader_config(data), eval_fraction=data.eval_fraction,
            split_salt=data.split_salt, max_bytes=data.tokenizer_sample_bytes,
            dedup=dedup == "exact")
        assert_that(got, equal_to(expected))


@pytest.mark.slow
def test_model_bytes_are_equal_on_every_runner(sample_input, tmp_path):
    """The same sample bytes and SentencePiece model bytes from the DirectRunner in memory, with
    two worker processes, and on the PortableRunner with SDK workers from an external pool."""
    from tests.support.beam_worker_pool import portable_args, worker_pool
    data = data_config(sample_input)
    runs = {}

    def build(name, args):
        out = str(tmp_path / name)
        tokenizer, figures = stage.build_tokenizer(
            data, out, lambda: beam.Pipeline(options=PipelineOptions(args)))
        runs[name] = (tokenizer.model_proto, figures)
        assert sorted(os.listdir(out)) == sorted([base.DESCRIPTION_FILE, base.MODEL_FILE, base.VOCAB_FILE])

    build("in_memory", BEAM_ARGS)
    build("two_workers", TWO_WORKERS)
    with worker_pool(str(tmp_path / "pool.log")) as (port, _):
        build("portable", portable_args(port))
    model, figures = runs["in_memory"]
    assert figures["sample_bytes"] == 30_000 and figures["documents_skipped"] >= 4
    for name, (other_model, other_figures) in runs.items():
        assert other_model == model, name
        other_figures = dict(other_figures, training_seconds=figures["training_seconds"])
        assert other_figures == figures, name


def test_read_sample_of_a_mixture_reads_every_source(tmp_path):
    """data.sources: the sample is drawn from every source's documents, each read with its own
    reader settings (the single-process reference reads them the same way)."""
    from components.config import SourceConfig
    from tests.support.mixture_sources import make_sources
    corpus = make_sources(str(tmp_path))
    data = data_config("", sources=(SourceConfig(name="a", input=corpus["a"], weight=2.0),
                                    SourceConfig(name="b", input=corpus["b"], format="jsonl")))
    expected = reference(data)
    ids = {document_id for split, sample in expected if split != "figures"
           for document_id, _ in sample}
    assert any(i.startswith("doc_") for i in ids) and any(i.startswith("part-") for i in ids)
    samples, _ = sample_pipeline.read_samples(
        data, str(tmp_path / "out"), lambda: TestPipeline(options=PipelineOptions(BEAM_ARGS)))
    for split, sample in expected:
        if split != "figures":
            assert list(zip(samples[split].document_ids, samples[split].texts)) == sample, split
