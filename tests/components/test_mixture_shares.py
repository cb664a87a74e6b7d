"""Share mixtures (data.sources[*].share): the realized share of the train tokens is the asked
one within the sampling error, the weights are the shares over the measured sizes, the
measuring pass is retry-safe, and the config errors name the setting.

The sampling-error bound. Source i of t_i train tokens (weight 1) is packed at weight
w_i = p_i T / t_i (T = sum t_j): every document floor(w_i) times plus once more with probability
f_i = frac(w_i) (a seeded hash of its content). Its realized tokens X_i = p_i T + e_i, with
E[e_i] = 0 and Var(e_i) = f_i (1 - f_i) sum_d n_d^2 (n_d: the document's tokens). The realized
share s_a = X_a / (X_a + X_b) = p_a + (e_a p_b - e_b p_a) / (T + e_a + e_b), so
|s_a - p_a| <= (|e_a| + |e_b|) / (T - |e_a| - |e_b|). With |e_i| <= 6 sigma_i the test fails at
random with probability ~1e-9, and never on a rerun: the sample is a hash, not a draw.

Old code (share treated as weight: 0.7 and 0.3 epochs of sources of 8:1 tokens) realizes ~95% /
5%, far outside the bound (the test asserts that it is).
"""

import hashlib
import json
import math
import os
import random

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline

from components import config as config_lib
from components.storage import listing
from components.corpus import documents as docs
from components.corpus import readers
from components.text_example_gen import mixture, shares, transforms
from components.text_example_gen.component import check_accounting, stage_counters

BEAM_ARGS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
PARAMS = dict(seq_len=64, eval_fraction=0.25, split_salt="", train_shards=2, eval_shards=1)
WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi "
         "rho sigma tau upsilon phi chi psi omega river stone cloud lamp paper window").split()
SIZES = {"big": 3200, "small": 400}   # records: about 8:1 in tokens
ASKED = {"big": 0.7, "small": 0.3}
SIGMAS = 6


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, str]:
    """Two JSONL sources of short seeded records (the same bytes on every machine); the small
    one repeats the big one's first 40 records (exact dedup packs them once, in `big`)."""
    root, rng = str(tmp_path_factory.mktemp("shares")), random.Random(39)
    out, lines = {}, []
    for name, count in SIZES.items():
        out[name] = os.path.join(root, name)
        os.makedirs(out[name])
        with open(os.path.join(out[name], "part.jsonl"), "w", encoding="utf-8") as fh:
            for i in range(count):
                text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 25)))
                lines.append(json.dumps({"text": f"{name} {i} {text}"}) + "\n")
                fh.write(lines[-1])
            fh.write("".join(lines[:40]) if name == "small" else "")
    return out


def reader():
    return readers.ReaderConfig("jsonl", "record", b"\n\n", "text", 10**7, 10**7)


def specs(corpus, as_weights: bool = False):
    """The mixture asking ASKED as shares (or, as_weights, the same numbers as weights)."""
    return [(mixture.SourceSpec(name, reader(), ASKED[name] if as_weights else 1.0, None,
                                None if as_weights else ASKED[name]),
             listing.list_input_files(directory)[1]) for name, directory in corpus.items()]


def run_stage(out_dir, sources):
    p = TestPipeline(options=PipelineOptions(BEAM_ARGS), blocking=True)
    _ = p | transforms.TextToTFRecordShards([], out_dir, reader_config=reader(), sources=sources,
                                            **PARAMS)
    result = p.run()
    result.wait_until_finish()
    return stage_counters(out_dir, tuple(spec.name for spec, _ in sources))


def train_documents(corpus) -> dict[str, list[int]]:
    """Per source: the tokens (UTF-8 bytes) of each distinct train document, read here."""
    out, seen = {}, set()
    for name, directory in corpus.items():
        out[name] = []
        for line in open(os.path.join(directory, "part.jsonl"), "rb"):
            text = json.loads(line)["text"].encode("utf-8")
            key = docs.content_key(text)
            if key not in seen and docs.split_for(key, PARAMS["eval_fraction"]) == "train":
                out[name].append(len(text))
            seen.add(key)
    return out


def share_bound(sizes: dict[str, list[int]]) -> float:
    """The module docstring's bound on |realized share - asked share|."""
    t = {name: sum(n) for name, n in sizes.items()}
    total = sum(t.values())
    errors = 0.0
    for name, n in sizes.items():
        frac = ASKED[name] * total / t[name] % 1.0
        errors += SIGMAS * math.sqrt(frac * (1 - frac) * sum(x * x for x in n))
    return errors / (total - errors)


@pytest.fixture(scope="module")
def share_run(corpus, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("share_run"))
    return run_stage(out, specs(corpus))


def test_realized_shares_are_the_asked_ones_within_the_sampling_error(corpus, share_run):
    sizes = train_documents(corpus)
    bound = share_bound(sizes)
    table = mixture.source_table(share_run)
    # The bound can tell the rule from "share read as epochs" (~95% / 5% on these sizes).
    t = {name: sum(n) for name, n in sizes.items()}
    as_epochs = ASKED["big"] * t["big"] / (ASKED["big"] * t["big"] + ASKED["small"] * t["small"])
    assert bound < 0.1 and abs(as_epochs - ASKED["big"]) > 2 * bound, (bound, as_epochs)
    for name in ASKED:
        assert abs(table[name]["share"] - ASKED[name]) <= bound, (name, table[name]["share"], bound)
    # The small source is repeated (2.7 epochs in expectation), the big one sampled (0.79).
    assert table["small"]["epochs"] > 2.0 and table["big"]["epochs"] < 1.0
    check_accounting(share_run, sum(len(f) for _, f in specs(corpus)), "manifest")
    assert share_run["documents_skipped_duplicate"] == 40


def test_share_weights_come_from_the_measured_train_tokens(corpus, share_run):
    """Exactly the weight rule at weights share * T / t_i, t_i counted here: the measuring pass
    tallied the train documents the packing pass packs (not eval, not exact duplicates)."""
    sizes = train_documents(corpus)
    weights = mixture.share_weights([spec for spec, _ in specs(corpus)],
                                    {name: sum(n) for name, n in sizes.items()})
    table, seen = mixture.source_table(share_run), set()
    for name, directory in corpus.items():
        expected = 0
        for line in open(os.path.join(directory, "part.jsonl"), "rb"):
            text = json.loads(line)["text"].encode("utf-8")
            key = docs.content_key(text)
            if key not in seen and docs.split_for(key, PARAMS["eval_fraction"]) == "train":
                expected += len(text) * mixture.copies(text, name, weights[name], "train")
            seen.add(key)
        assert table[name]["tokens"]["train"] == expected, name
    assert weights["big"] == pytest.approx(0.7 * sum(map(sum, sizes.values())) / sum(sizes["big"]))


def test_weights_are_the_shares_over_the_sizes():
    spec = lambda name, share: mixture.SourceSpec(name, reader(), 1.0, None, share)
    weights = mixture.share_weights([spec("a", 0.75), spec("b", 0.25)], {"a": 100, "b": 300})
    assert weights == {"a": 3.0, "b": pytest.approx(1 / 3)}
    # A weight mixture has no share weights; a source without train tokens keeps weight 1.
    assert mixture.share_weights([mixture.SourceSpec("a", reader(), 2.0)], {"a": 5}) == {}
    assert mixture.share_weights([spec("a", 0.5), spec("b", 0.5)], {"a": 10}) == {
        "a": 1.0, "b": 1.0}


def test_the_measuring_pass_is_retry_safe_and_writes_nothing(corpus, tmp_path):
    """TallyUnitFn run twice on one unit yields the same tallies and leaves no file behind."""
    sources = specs(corpus)
    convert = transforms.ConvertUnitFn(reader(), str(tmp_path), seq_len=64, eval_fraction=0.25,
                                       split_salt="", num_shards={"train": 2, "eval": 1},
                                       sources={spec.name: spec for spec, _ in sources})
    fn = shares.TallyUnitFn(convert)
    fn.setup()
    (unit, *_) = mixture.plan_mixture(sources)
    first, second = list(fn.process(unit)), list(fn.process(unit))
    assert first == second and first and all(name in ASKED for name, _ in first)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("sources, message", [
    ("[{name: a, input: x, share: 0.7}, {name: b, input: y}]",
     r"data.sources\[1\] \(b\).share: missing; a mixture gives every source a share"),
    ("[{name: a, input: x, share: 0.7, weight: 2}, {name: b, input: y, share: 0.3}]",
     r"data.sources\[0\] \(a\).weight: a mixture gives shares or weights, not both"),
    ("[{name: a, input: x, share: 1.5}, {name: b, input: y, share: -0.5}]",
     r"data.sources\[0\] \(a\).share: must be in \(0, 1\], got 1.5"),
    ("[{name: a, input: x, share: 0}, {name: b, input: y, share: 1}]",
     r"\(a\).share: must be in \(0, 1\]"),
    ("[{name: a, input: x, share: 0.7}, {name: b, input: y, share: 0.4}]",
     r"data.sources\[\*\].share: must sum to 1 \(within 0.001\), got 1.1 \(a 0.7, b 0.4\)"),
])
def test_share_config_errors_name_the_setting(sources, message):
    with pytest.raises(config_lib.ConfigError, match=message):
        config_lib.build_config("tiny", overrides=[f"data.sources={sources}"])


def test_shares_within_the_tolerance_are_accepted():
    data = config_lib.build_config("tiny", overrides=[
        "data.sources=[{name: a, input: x, share: 0.3333}, {name: b, input: y, share: 0.3333}, "
        "{name: c, input: z, share: 0.3333}]"]).data
    assert [s.share for s in data.sources] == [0.3333] * 3
    assert data.sources[0].weight == 1.0
