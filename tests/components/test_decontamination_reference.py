"""Decontamination with its exact prefilter (components/corpus/prefilter.py) against a plain
reference written here: a regular expression for the normalization, Python lists of words, every
13-word tuple of an evaluation text in a set, every short text compared word list to word list.
Planted contaminations at every byte alignment, across line breaks, in capitals and punctuation,
non-ASCII words, one-letter-word n-grams (too short to anchor), near misses whose joined letters
equal an entry's (word boundaries moved) and empty or tiny documents: the same sets, the same
lengths, the same removed documents."""

import random
import re

from components.corpus import contamination, prefilter

N, MIN_WORDS = 13, 8
VOCAB = ("the river flows through ancient city capital eastern empire years before fall "
         "data stage model train eval index window anchor byte word caf\u00e9 na\u00efve "
         "\u6771\u4eac stra\u00dfe 1969 apollo 11 x y").split()


def reference_words(text: bytes) -> list[bytes]:
    """The module docstring's normalization, written independently: ASCII lowercase, every
    ASCII byte but a letter or digit a separator, bytes >= 128 kept."""
    return re.sub(rb"[\x00-/:-`{-\x7f]+", b" ", text.lower()).split()


def reference_matched(sets: dict[str, list[bytes]], document: bytes,
                      min_words: int = MIN_WORDS) -> dict[str, int]:
    words = reference_words(document)
    found = {}
    for name, texts in sets.items():
        longest = 0
        for text in texts:
            item = reference_words(text)
            length = min(len(item), N)
            if length < min_words:
                continue
            grams = {tuple(item[i:i + length]) for i in range(len(item) - length + 1)}
            if any(tuple(words[i:i + length]) in grams for i in range(len(words) - length + 1)):
                longest = max(longest, length)
        if longest:
            found[name] = longest
    return found


def eval_sets(rng) -> dict[str, list[bytes]]:
    def text(count):
        return " ".join(rng.choice(VOCAB) for _ in range(count)).encode()
    return {
        "long": [text(40), text(25), ("Caf\u00e9 na\u00efve \u6771\u4eac " + text(20).decode()).encode(),
                 b"a b c d e f g h i j k l m n o", text(13)],
        "short": [text(9), text(12), b"What is the boiling point of water at sea level?",
                  text(3), b""],
    }


def documents(rng, sets) -> list[bytes]:
    """Filler from the same vocabulary (probes hit, the full rule decides), each set's entries
    planted at byte offsets 0-16 from a document's start and at its end, varied in case,
    punctuation and line breaks, cut by one word, or with a word boundary moved."""
    def filler(count):
        return " ".join(rng.choice(VOCAB) for _ in range(count))
    docs = [b"", b" ", b"x", b"!!", b"a b c", filler(3).encode()]
    items = [reference_words(t) for texts in sets.values() for t in texts]
    for item in items:
        if not item:
            continue
        for start in range(min(len(item), 3)):
            words = [w.decode() for w in item[start:start + N]]
            for pad in range(17):
                variant = rng.choice([" ".join(words), ",\n".join(w.upper() for w in words),
                                      "  ".join(words) + "!", " ".join(words[1:]),
                                      " ".join(words[:-1]) + " " + words[-1][:1] + " " + words[-1][1:],
                                      "".join(words[:2]) + " " + " ".join(words[2:])])
                head = ("z" * pad) if rng.random() < 0.5 else filler(rng.randrange(4)) + "." + " " * pad
                tail = filler(rng.randrange(0, 30)) if rng.random() < 0.7 else ""
                docs.append(f"{head} {variant} {tail}".encode())
    docs += [filler(rng.randrange(1, 300)).encode() for _ in range(150)]
    return docs


def test_matched_equals_the_plain_reference_on_planted_documents():
    rng = random.Random(57)
    sets = eval_sets(rng)
    index = contamination.index_texts(sets, N, MIN_WORDS)
    assert index.prefilter.narrow is not None   # a-m: 13 bytes joined, probed every 6 bytes
    docs = documents(rng, sets)
    got = [index.matched(d) for d in docs]
    want = [reference_matched(sets, d) for d in docs]
    assert [i for i, (g, w) in enumerate(zip(got, want)) if g != w] == []
    removed = sum(1 for w in want if w)
    assert removed > 100 and len(docs) - removed > 300   # both kinds, plenty of each
    # The prefilter is exact: it passes every contaminated document, and it does work: most
    # filler-only documents never reach the hashing.
    joined = [contamination.joined(d) for d in docs]
    assert all(index.prefilter.may_match(j) for j, w in zip(joined, want) if w)
    ruled_out = sum(1 for j in joined if not index.prefilter.may_match(j))
    assert ruled_out > 100


def test_short_entries_are_searched_whole_and_too_many_turn_the_prefilter_off():
    """min_words 4: texts of 4 one-letter words join to 4 bytes, under one 8-byte window:
    searched whole up to SHORT_MAX of them; more, and there is no prefilter, the full rule for
    every document. Either way the reference's answer."""
    rng = random.Random(11)
    letters = "abcdefghijklmnopqrstuvwxyz"
    for count, on in ((4, True), (prefilter.SHORT_MAX + 5, False)):
        sets = {"tiny": [" ".join(rng.choice(letters) for _ in range(4)).encode()
                         for _ in range(count)] + [b"a b c d e f g h i j k l m n"]}
        index = contamination.index_texts(sets, N, 4)
        assert (index.prefilter is not None and len(index.prefilter.short) == count) == on
        docs = documents(rng, sets)[:300]
        assert [index.matched(d) for d in docs] == [reference_matched(sets, d, 4) for d in docs]
        assert sum(1 for d in docs if index.matched(d)) > 20


def test_the_default_held_out_set_is_anchored_and_rules_out_unrelated_code():
    """The shipped set (bigtrain's own code): every entry anchored, its own texts all found,
    and a page of the standard library's code ruled out before hashing."""
    import json
    import gzip
    import os
    from components.storage.listing import HELDOUT_DIR
    path = os.path.join(HELDOUT_DIR, "bigtrain-code-2026-11-27.jsonl.gz")
    texts = [json.loads(line)["text"].encode() for line in gzip.open(path)]
    index = contamination.index_texts({"code": texts}, N, MIN_WORDS)
    assert index.prefilter is not None and index.prefilter.short == ()
    assert all(index.matched(t) for t in texts if len(reference_words(t)) >= MIN_WORDS)
    page = open(random.__file__, "rb").read()
    assert not index.prefilter.may_match(contamination.joined(page))
    assert index.matched(page) == reference_matched({"code": texts}, page) == {}
