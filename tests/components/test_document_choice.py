"""Which eval documents the whole-document evaluation scores, and the compressor figures on them:
eval shards packed from known texts decode back into exactly those texts; the chosen ones are the
smallest-key prefix that fits the byte budget (a reference that sorts every key, computed here);
the window plan scores every target once with at least stride_context ids before it; the
compressor figures are zlib.compress / lzma.compress of the very same bytes.

Mutations these catch: the budget compared with < instead of <= (the boundary case), documents
cut after the budget check (test_a_long_document_is_cut), the key over the text's position in
the shard instead of its ids (the shuffled-shard case), the compressors run on the concatenation
for the per-document figure, a window plan that skips or repeats a target."""

import hashlib
import lzma
import os
import random
import zlib

import numpy as np
import pytest

from components.evaluation import documents
from components.text_example_gen import eval_split, packing, shards
from components.tokenizer.byte_level import ByteTokenizer

TOKENIZER = ByteTokenizer()
BYTE_LENGTHS = TOKENIZER.token_byte_lengths()


def texts(count: int = 12, seed: int = 5) -> list[bytes]:
    rng = random.Random(seed)
    return [(f"# file {i}\n" + "".join(f"x{rng.randint(0, 99)} = {rng.random():.3f}\n"
                                        for _ in range(rng.randint(1, 40)))).encode()
            for i in range(count)]


def write_eval_shard(uri: str, docs: list[bytes], seq_len: int = 32) -> None:
    packer = packing.Packer(seq_len)
    windows = [w for w in (packer.add(d) for d in docs) if w is not None] + [packer.finish()]
    path = shards.shard_path(uri, "eval", 0, 1)
    os.makedirs(os.path.dirname(path))
    writer = shards.PieceWriter(path)
    writer.write(shards.framed_examples(np.concatenate(windows)))
    writer.close()


def reference_choice(docs: list[bytes], budget: int, cut: int) -> list[bytes]:
    """Sort every document by its key, take the prefix that fits (each cut to `cut` bytes)."""
    def key(d):
        ids = np.frombuffer(d[:cut], np.uint8).astype(np.int64)
        return hashlib.sha256(documents.DOCUMENT_SEED.encode() + ids.tobytes()).digest()[:16]
    chosen, used = [], 0
    for d in sorted(docs, key=key):
        if used + len(d[:cut]) > budget:
            break
        chosen.append(d[:cut])
        used += len(d[:cut])
    return chosen


def chosen_texts(uri: str, budget: int, cut: int) -> list[bytes]:
    found = documents.choose_documents(eval_split.eval_split_documents(uri, "test", TOKENIZER),
                                       BYTE_LENGTHS, budget, cut)
    return [TOKENIZER.decode(ids) for ids in found]


def test_eval_shards_give_back_the_documents_and_the_smallest_keys_that_fit(tmp_path):
    docs = texts()
    write_eval_shard(str(tmp_path / "a"), docs)
    assert chosen_texts(str(tmp_path / "a"), 10**9, 10**9) == reference_choice(docs, 10**9, 10**9)
    assert sorted(chosen_texts(str(tmp_path / "a"), 10**9, 10**9)) == sorted(docs)
    half = sum(len(d) for d in docs) // 2
    want = reference_choice(docs, half, 10**9)
    assert chosen_texts(str(tmp_path / "a"), half, 10**9) == want and 0 < len(want) < len(docs)
    # exactly at the budget: included; one byte under: the last one is not
    exact = sum(len(d) for d in want)
    assert chosen_texts(str(tmp_path / "a"), exact, 10**9) == want
    assert chosen_texts(str(tmp_path / "a"), exact - 1, 10**9) == want[:-1]
    # the same documents in another order (another shard layout): the same choice, same order
    shuffled = docs[:]
    random.Random(1).shuffle(shuffled)
    write_eval_shard(str(tmp_path / "b"), shuffled)
    assert chosen_texts(str(tmp_path / "b"), half, 10**9) == want


def test_a_long_document_is_cut_to_max_document_bytes(tmp_path):
    docs = texts()
    write_eval_shard(str(tmp_path / "a"), docs)
    got = chosen_texts(str(tmp_path / "a"), 400, 50)
    assert got == reference_choice(docs, 400, 50) and all(len(t) <= 50 for t in got)
    assert len(got) == 8                                    # 8 x 50 bytes = the budget, exactly


def test_compressor_figures_are_the_standard_library_on_the_same_bytes(tmp_path):
    docs = texts()
    write_eval_shard(str(tmp_path / "a"), docs)
    chosen = chosen_texts(str(tmp_path / "a"), 2000, 10**9)
    got = documents.compressed_bits_per_byte(chosen)
    size = sum(len(t) for t in chosen)
    assert got["document_zlib9_bits_per_byte"] == 8 * sum(len(zlib.compress(t, 9)) for t in chosen) / size
    assert got["document_lzma9_bits_per_byte"] == 8 * sum(len(lzma.compress(t, preset=9)) for t in chosen) / size
    assert got["concatenated_lzma9_bits_per_byte"] == 8 * len(lzma.compress(b"".join(chosen), preset=9)) / size
    assert got["concatenated_zlib9_bits_per_byte"] == 8 * len(zlib.compress(b"".join(chosen), 9)) / size
    # each file alone pays its own container: more than one archive of them all
    assert got["document_lzma9_bits_per_byte"] > got["concatenated_lzma9_bits_per_byte"]


@pytest.mark.parametrize("context", [4, 16])
def test_the_window_plan_scores_every_target_once_with_enough_context(context):
    for stride_context in sorted({0, 1, context // 2, context - 1}):
        for length in range(2, 5 * context):
            seen = np.zeros(length, int)
            for begin, first, end in documents.strided_windows(length, context, stride_context):
                assert end - begin <= context + 1                   # fits the model's context
                for position in range(max(first, begin + 1), end):
                    seen[position] += 1
                    assert position <= context or position - begin >= stride_context
            assert seen[0] == 0 and (seen[1:] == 1).all(), (context, stride_context, length)


def test_stride_context_must_let_windows_advance():
    assert documents.stride_context_for(-1, 128) == 64
    assert documents.stride_context_for(127, 128) == 127
    with pytest.raises(ValueError, match="eval.stride_context"):
        documents.stride_context_for(128, 128)
