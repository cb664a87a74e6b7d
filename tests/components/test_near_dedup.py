"""Near-duplicate removal (data.dedup=near): MinHash LSH against ground truth and against
datasketch's MinHashLSH (a library we did not write), clusters against networkx's connected
components, and the whole stage on the DirectRunner (both modes)."""

import itertools
import json
import os
import random

import networkx
import numpy as np
import pytest
from datasketch import MinHash, MinHashLSH

from components import config as config_lib
from components.config import NearDedupConfig, QualityFilterConfig
from components.corpus import documents as docs
from components.corpus import minhash, readers
from components.corpus.screen import DocumentScreen
from components.text_example_gen import cleaning, transforms
from components.text_example_gen.component import check_accounting
from tests.support.data_stage import (BEAM_ARGS, TWO_WORKERS, digest_tree, reader_config,
                                              run_stage)
from tests.support.beam_worker_pool import portable_args, worker_pool

THRESHOLD, NUM_PERM, NGRAM = 0.8, 128, 5
# Word substitutions of the variants of one base document (200 words): the Jaccard similarity
# of their 5-word shingle sets spans both sides of the threshold.
EDITS = (0, 1, 2, 3, 5, 8, 12, 20, 40)


def synthetic_corpus(families=60, words=200, seed=11):
    """[(family, edits, text)]: each family is a random base text and one variant per EDITS
    entry (that many words replaced at distinct random positions). Different families share no
    5-gram (words drawn from 20 000)."""
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(20_000)]
    corpus = []
    for family in range(families):
        base = [rng.choice(vocabulary) for _ in range(words)]
        for edits in EDITS:
            variant = list(base)
            for position in rng.sample(range(words), edits):
                variant[position] = f"edit{family}x{position}"
            corpus.append((family, edits, " ".join(variant).encode()))
    return corpus


def shingle_set(text: bytes) -> set:
    """The exact shingles, as tuples of words (no hashing: the ground truth)."""
    words = text.lower().split()
    return {tuple(words[i:i + NGRAM]) for i in range(len(words) - NGRAM + 1)}


def true_jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b)


# Word substitutions in the variant of a pair (200 words): Jaccard of 5-word shingle sets about
# (196 - 5k) / (196 + 5k): 1.0, 0.95, 0.90, 0.86, 0.81 | 0.77, 0.73, 0.66, 0.59, 0.53, 0.42, 0.32.
PAIR_EDITS = (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20)


def pair_corpus(pairs=600, words=200, seed=17):
    """[(pair, edits, text)]: pair i is a random base text and a variant with
    PAIR_EDITS[i % 12] words replaced at distinct random positions (known edit distance)."""
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(20_000)]
    corpus = []
    for pair in range(pairs):
        base = [rng.choice(vocabulary) for _ in range(words)]
        edits = PAIR_EDITS[pair % len(PAIR_EDITS)]
        variant = list(base)
        for position in rng.sample(range(words), edits):
            variant[position] = f"edit{pair}x{position}"
        corpus += [(pair, edits, " ".join(base).encode()), (pair, edits, " ".join(variant).encode())]
    return corpus


def candidate_pairs_ours(texts, params):
    signer, buckets = minhash.Signer(params), {}
    for i, text in enumerate(texts):
        for key in signer.band_keys(text):
            buckets.setdefault(key, []).append(i)
    return {pair for members in buckets.values() for pair in itertools.combinations(members, 2)}


def candidate_pairs_datasketch(texts, threshold):
    lsh, pairs = MinHashLSH(threshold=threshold, num_perm=NUM_PERM), set()
    for i, text in enumerate(texts):
        m = MinHash(num_perm=NUM_PERM)
        m.update_batch([b" ".join(s) for s in shingle_set(text)])
        pairs.update((j, i) for j in lsh.query(m))
        lsh.insert(i, m)
    return pairs


def precision_recall(found: set, truth: set) -> tuple[float, float]:
    hit = len(found & truth)
    return hit / max(len(found), 1), hit / max(len(truth), 1)


def test_lsh_against_ground_truth_and_datasketch():
    """600 pairs with known edit distances. Ground truth: true Jaccard of the 5-word shingle
    sets >= 0.8. Ours: the pair shares a band; datasketch: MinHashLSH(threshold=0.8,
    num_perm=128) returns it. Both use the same banding (9 x 13), so both follow the S-curve
    P(candidate) = 1 - (1 - J^13)^9: pairs far from the threshold are decided right, pairs near
    it by chance. docs/data.md states the figures this prints."""
    corpus = pair_corpus()
    texts = [text for _, _, text in corpus]
    params = minhash.params_of(NearDedupConfig(threshold=THRESHOLD, num_perm=NUM_PERM, ngram=NGRAM))
    assert (params.bands, params.rows) == (9, 13)      # datasketch's choice for (0.8, 128)
    lsh_datasketch = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
    assert (lsh_datasketch.b, lsh_datasketch.r) == (params.bands, params.rows)

    ours = candidate_pairs_ours(texts, params)
    theirs = candidate_pairs_datasketch(texts, THRESHOLD)
    assert not {(i, j) for i, j in ours | theirs if corpus[i][0] != corpus[j][0]}
    pairs = [(2 * k, 2 * k + 1) for k in range(len(corpus) // 2)]
    similarity = {p: true_jaccard(shingle_set(texts[p[0]]), shingle_set(texts[p[1]])) for p in pairs}
    truth = {p for p in pairs if similarity[p] >= THRESHOLD}
    precision, recall = precision_recall(ours, truth)
    ds_precision, ds_recall = precision_recall(theirs, truth)
    agreement = np.mean([(p in ours) == (p in theirs) for p in pairs])
    far = [p for p in pairs if abs(similarity[p] - THRESHOLD) >= 0.12]
    far_right = np.mean([(p in ours) == (p in truth) for p in far])
    far_agreement = np.mean([(p in ours) == (p in theirs) for p in far])
    print(f"ours P={precision:.3f} R={recall:.3f}; datasketch P={ds_precision:.3f} "
          f"R={ds_recall:.3f}; agreement {agreement:.3f} ({far_agreement:.3f} and {far_right:.3f} "
          f"right on the {len(far)} pairs with |J - 0.8| >= 0.12); {len(truth)} true pairs")
    assert abs(precision - ds_precision) < 0.08 and abs(recall - ds_recall) < 0.08
    assert precision >= 0.85 and recall >= 0.75
    assert far_right >= 0.98 and far_agreement >= 0.97 and agreement >= 0.78
    # Per edit count: the share of pairs found follows the S-curve (3 binomial sd + 0.03).
    for edits in PAIR_EDITS:
        group = [p for p in pairs if corpus[p[0]][1] == edits]
        j = np.mean([similarity[p] for p in group])
        expected = 1 - (1 - j ** params.rows) ** params.bands
        found = np.mean([p in ours for p in group])
        assert abs(found - expected) <= 3 * np.sqrt(expected * (1 - expected) / len(group)) + 0.03, (
            edits, j, found, expected)


def test_signature_estimates_jaccard_as_well_as_datasketch():
    """Mean |estimate - true Jaccard| over the variant pairs of 20 families: no worse than
    datasketch's MinHash (128 functions each; both about 0.03 here) and unbiased."""
    corpus = synthetic_corpus(families=20)
    signer = minhash.Signer(minhash.params_of(NearDedupConfig(ngram=NGRAM)))
    ours, theirs = [], []
    for family in range(20):
        members = corpus[family * len(EDITS):(family + 1) * len(EDITS)]
        for (_, _, a), (_, _, b) in itertools.combinations(members, 2):
            truth = true_jaccard(shingle_set(a), shingle_set(b))
            ours.append(minhash.estimated_jaccard(signer.signature(a), signer.signature(b)) - truth)
            m_a, m_b = MinHash(num_perm=NUM_PERM), MinHash(num_perm=NUM_PERM)
            m_a.update_batch([b" ".join(s) for s in shingle_set(a)])
            m_b.update_batch([b" ".join(s) for s in shingle_set(b)])
            theirs.append(m_a.jaccard(m_b) - truth)
    assert np.mean(np.abs(ours)) <= np.mean(np.abs(theirs)) + 0.005
    assert abs(np.mean(ours)) < 0.01


def test_shingles_are_stable_and_normalized():
    """The same text gives the same shingles on every run (the hash does not depend on Python's
    hash seed) and case and whitespace do not matter; one changed word changes the shingles."""
    a = minhash.shingle_hashes(b"The  quick brown\nfox jumps over", "word", 3)
    assert np.array_equal(a, minhash.shingle_hashes(b"the quick brown fox jumps over ", "word", 3))
    assert len(a) == 4
    assert not np.array_equal(a, minhash.shingle_hashes(b"the quick brown cat jumps over", "word", 3))
    assert len(minhash.shingle_hashes(b"abcdef", "byte", 4)) == 3
    assert len(minhash.shingle_hashes(b"ab", "word", 5)) == 1           # shorter than a shingle
    sig = minhash.Signer(minhash.MinHashParams(16, 4, 4, "word", 3, 1)).signature(b"a b c d")
    assert sig.tolist() == minhash.Signer(minhash.MinHashParams(16, 4, 4, "word", 3, 1)).signature(
        b"a b c d").tolist()


def union_find(edges):
    fn = cleaning.UnionFindFn()
    acc = fn.create_accumulator()
    for edge in edges:
        acc = fn.add_input(acc, edge)
    return acc


def test_clusters_are_connected_components_with_the_first_document_kept():
    """Against networkx: every member maps to the smallest node of its connected component,
    whatever the order of the edges and however the accumulators were split and merged."""
    rng = random.Random(5)
    nodes = [(u, o, f"doc{u}-{o}") for u in range(6) for o in range(8)]
    edges = [tuple(rng.sample(nodes, 2)) for _ in range(30)]
    graph = networkx.Graph(edges)
    expected = sorted((node, min(component)) for component in networkx.connected_components(graph)
                      for node in component if node != min(component))
    fn = cleaning.UnionFindFn()
    assert fn.extract_output(union_find(edges)) == expected
    for _ in range(5):
        rng.shuffle(edges)
        parts = [union_find(edges[k::3]) for k in range(3)]
        assert fn.extract_output(fn.merge_accumulators(parts)) == expected
    assert list(cleaning.bucket_edges((b"k", [nodes[3], nodes[1], nodes[2], nodes[1]]))) == [
        (nodes[1], nodes[2]), (nodes[1], nodes[3])]


def write_near_corpus(root):
    """Three files of paragraphs: a few families of near-copies spread across files and units,
    one exact copy, and unrelated paragraphs."""
    corpus = synthetic_corpus(families=12, words=120, seed=3)
    rng = random.Random(4)
    rng.shuffle(corpus)
    os.makedirs(root)
    files, chunks = [], [corpus[k::3] for k in range(3)]
    chunks[2].append(chunks[0][0])                       # an exact copy, in a later file
    for k, chunk in enumerate(chunks):
        path = os.path.join(root, f"part{k}.txt")
        with open(path, "wb") as fh:
            fh.write(b"\n\n".join(text for _, _, text in chunk))
        files.append((f"part{k}.txt", path))
    return files


def reference_skips(files, config, params):
    """Single-process reference: read every document, drop exact later copies, band keys, then
    networkx's connected components; {skipped id: representative id}."""
    signer, seen, graph, order = minhash.Signer(params), set(), networkx.Graph(), {}
    buckets = {}
    for unit in readers.plan_units(files, config):
        for piece in unit.pieces:
            for event in readers.read_piece(piece, config):
                if isinstance(event, docs.Document):
                    key = docs.content_key(event.text)
                    if key in seen:
                        continue
                    seen.add(key)
                    order[event.id] = len(order)
                    graph.add_node(event.id)
                    for band in signer.band_keys(event.text):
                        buckets.setdefault(band, []).append(event.id)
    for members in buckets.values():
        graph.add_edges_from(zip(members, members[1:]))
    skips = {}
    for component in networkx.connected_components(graph):
        first = min(component, key=order.get)
        skips.update({member: first for member in component if member != first})
    return skips


def run_near(files, out_dir, beam_args=BEAM_ARGS, config=None, near=NearDedupConfig(threshold=0.8)):
    return run_stage(files, out_dir, beam_args=beam_args, config=config, dedup="near",
                     near_dedup=minhash.params_of(near))


# Word 5-grams (the default) and byte 16-grams (components/config/cleaning.py, `ngram`: a byte
# shingle needs a larger n).
SHINGLES = {"word": NearDedupConfig(threshold=0.8),
            "byte": NearDedupConfig(threshold=0.8, shingle="byte", ngram=16)}


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
@pytest.mark.parametrize("shingle", sorted(SHINGLES))
def test_stage_skips_near_duplicates_as_the_reference_does(tmp_path, shingle):
    files = write_near_corpus(str(tmp_path / "in"))
    config = reader_config(document="separator", range_bytes=3000)
    assert len(readers.plan_units(files, config)) > 5
    counters = run_near(files, str(tmp_path / "out"), config=config, near=SHINGLES[shingle])
    check_accounting(counters, len(files), "manifest")
    manifest = [json.loads(line) for line in open(tmp_path / "out" / transforms.QUARANTINE_MANIFEST)]
    skipped = {m["path"]: m["representative"] for m in manifest if m["reason"] == docs.NEAR_DUPLICATE}
    expected = reference_skips(files, config, minhash.params_of(SHINGLES[shingle]))
    assert skipped == expected and len(expected) >= 20
    assert counters["documents_skipped_near_duplicate"] == len(expected)
    assert counters["documents_skipped_duplicate"] == 1
    assert sum(m["bytes"] for m in manifest) == counters["bytes_quarantined"]
    # Exact dedup alone keeps them all.
    plain = run_stage(files, str(tmp_path / "exact"), config=config, dedup="exact")
    assert plain["documents_packed"] == counters["documents_packed"] + len(expected)


def test_a_screened_document_never_represents_a_clean_near_copy(tmp_path):
    """The screen comes first: a document the decontamination screen drops takes no part in
    near dedup. a.txt (read first) is b.txt with a 13-word evaluation question inside: near
    copies (5-gram Jaccard 0.90, sharing a band), only a.txt contaminated. The plain rule (drop
    the screened, then cluster the rest) keeps b.txt: 1 document packed. Signing a.txt too made
    it b.txt's representative, and both were dropped (0 packed)."""
    rng = random.Random(5)
    base = [f"w{rng.randrange(20_000)}" for _ in range(200)]
    question = [f"q{i}" for i in range(13)]
    clean, contaminated = " ".join(base).encode(), " ".join(base[:100] + question + base[100:]).encode()
    assert true_jaccard(shingle_set(clean), shingle_set(contaminated)) > 0.89
    signer = minhash.Signer(minhash.params_of(NearDedupConfig(threshold=0.8)))
    assert set(signer.band_keys(clean)) & set(signer.band_keys(contaminated))  # one cluster, unscreened
    os.makedirs(tmp_path / "in")
    files = []
    for name, text in (("a.txt", contaminated), ("b.txt", clean)):
        (tmp_path / "in" / name).write_bytes(text)
        files.append((name, str(tmp_path / "in" / name)))
    (tmp_path / "eval.txt").write_text(" ".join(question))
    screen = DocumentScreen(QualityFilterConfig(), (("eval", (str(tmp_path / "eval.txt"),)),), 13)
    counters = run_stage(files, str(tmp_path / "out"), dedup="near", screen=screen,
                         near_dedup=minhash.params_of(NearDedupConfig(threshold=0.8)))
    assert (counters["documents_skipped_contaminated"], counters["documents_skipped_near_duplicate"],
            counters["documents_packed"]) == (1, 0, 1)


def run_cleaning(files, out_dir, eval_file, beam_args):
    """Near-dedup, two quality filters and decontamination together."""
    screen = DocumentScreen(QualityFilterConfig(min_words=20), (("eval", (eval_file,)),), 13)
    return run_stage(files, out_dir, beam_args=beam_args,
                     config=reader_config(document="separator", range_bytes=3000), dedup="near",
                     near_dedup=minhash.params_of(NearDedupConfig(threshold=0.8)), screen=screen,
                     filters=("word_count", "duplicate_lines"))


@pytest.mark.slow
def test_cleaning_gives_the_same_bytes_in_memory_multi_processing_and_portable(tmp_path):
    """The whole cleaning (exact, near, filters, decontamination) on the DirectRunner in both
    modes and on the PortableRunner with separate SDK workers: identical shards, manifest and
    counters; each step skipped something."""
    files = write_near_corpus(str(tmp_path / "in"))
    with open(files[1][1], "ab") as fh:
        fh.write(b"\n\ntoo short\n\n" + b"\n".join([b"same line again and again"] * 30))
    eval_file = tmp_path / "eval.txt"
    eval_file.write_bytes(b" ".join(open(files[2][1], "rb").read().split()[40:60]))
    in_memory = run_cleaning(files, str(tmp_path / "a"), str(eval_file), BEAM_ARGS)
    parallel = run_cleaning(files, str(tmp_path / "b"), str(eval_file), TWO_WORKERS)
    with worker_pool(str(tmp_path / "pool.log")) as (port, _):
        portable = run_cleaning(files, str(tmp_path / "c"), str(eval_file), portable_args(port))
    check_accounting(in_memory, len(files), "manifest")
    for name in ("duplicate", "near_duplicate", "filter_word_count", "filter_duplicate_lines",
                 "contaminated"):
        assert in_memory[f"documents_skipped_{name}"] >= 1, name
    assert parallel == in_memory and portable == in_memory
    assert digest_tree(str(tmp_path / "a")) == digest_tree(str(tmp_path / "b")) == digest_tree(
        str(tmp_path / "c"))


@pytest.mark.parametrize("setting, message", [
    ("threshold=0", r"data.near_dedup.threshold: must be in \(0, 1\), got 0"),
    ("threshold=1", r"data.near_dedup.threshold: must be in \(0, 1\), got 1"),
    ("threshold=1.5", r"data.near_dedup.threshold: must be in \(0, 1\)"),
    ("shingle=char", r"data.near_dedup.shingle: 'char' is not one of"),
    ("num_perm=1", r"data.near_dedup: num_perm \(1\) must be >= 2"),
    ("ngram=0", r"data.near_dedup: .* ngram \(0\) >= 1"),
    ("bands=-1", r"data.near_dedup: .* bands \(-1\) in \[0, num_perm\]"),
    ("bands=129", r"data.near_dedup: .* bands \(129\) in \[0, num_perm\]"),
])
def test_near_dedup_settings_out_of_range_are_named_config_errors(setting, message):
    with pytest.raises(config_lib.ConfigError, match=message):
        config_lib.build_config("tiny", overrides=[f"data.near_dedup.{setting}"])


def test_near_dedup_settings_in_range_are_taken():
    built = config_lib.build_config("tiny", overrides=[
        "data.near_dedup.shingle=byte", "data.near_dedup.ngram=16", "data.near_dedup.bands=128"])
    assert minhash.params_of(built.data.near_dedup) == minhash.MinHashParams(
        128, 128, 1, "byte", 16, 1)
