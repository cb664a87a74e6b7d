"""The split is by content and exact duplicates are packed once (issue 20, item 5)."""

import os

from components.config import DataConfig
from components.corpus import documents as docs
from components.storage import listing
from components.text_example_gen.component import check_accounting
from tests.support.data_stage import packed_ids, run_stage
from benchmarks.support import single_process

MAIN = b"import sys\n\nif __name__ == '__main__':\n    sys.exit(main())\n"
COPIES = 8


def _write_corpus(root):
    """COPIES identical `__main__.py` (as in the stdlib) and 30 distinct files."""
    for index in range(COPIES):
        os.makedirs(os.path.join(root, f"pkg{index}"))
        with open(os.path.join(root, f"pkg{index}", "__main__.py"), "wb") as fh:
            fh.write(MAIN)
    for index in range(30):
        with open(os.path.join(root, f"mod{index}.py"), "wb") as fh:
            fh.write(f"def f{index}(x):\n    return x * {index} + {index * 7}\n".encode() * (index + 1))


def test_identical_files_share_a_split_and_are_packed_once(tmp_path):
    """Fails before the fix: the split hashed the path, so the 8 identical files landed in both
    splits (train/eval leakage), and every copy was packed. Reference: the file bytes."""
    root = str(tmp_path / "in")
    _write_corpus(root)
    for dedup, packed_copies in (("none", COPIES), ("exact", 1)):
        data = DataConfig(input=root, exclude=(), eval_fraction=0.5, dedup=dedup)
        splits = [split for split, d in single_process.read_split_documents(data)
                  if d.text == MAIN]
        assert len(splits) == packed_copies and len(set(splits)) == 1, (dedup, splits)

    _, files = listing.list_input_files(root)
    counters = run_stage(files, str(tmp_path / "out"), eval_fraction=0.5)
    check_accounting(counters, len(files), "manifest")          # bytes conserved
    assert counters["documents_skipped_duplicate"] == COPIES - 1
    assert counters["bytes_duplicate"] == (COPIES - 1) * len(MAIN)
    assert counters["documents_packed"] == 30 + 1
    ids = packed_ids(str(tmp_path / "out"))
    needle = list(MAIN)
    found = {}
    for split, rows in ids.items():       # windows overlap by one token: drop each row's first
        stream = [token for row in rows for token in row[1:]]
        found[split] = sum(1 for i in range(len(stream) - len(needle) + 1)
                           if stream[i:i + len(needle)] == needle)
    assert sorted(found.values()) == [0, 1], found              # once, in one split

    counters = run_stage(files, str(tmp_path / "all"), eval_fraction=0.5, dedup="none")
    check_accounting(counters, len(files), "manifest")
    assert counters["documents_skipped_duplicate"] == 0 and counters["documents_packed"] == 38


def test_editing_the_top_of_a_file_keeps_the_other_documents_splits(tmp_path):
    """Fails before the fix: documents were keyed `path@offset`, so prepending a few bytes moved
    every later document's offset and reshuffled about half of their splits."""
    texts = [f"paragraph {i}: ".encode() + b"word " * (i % 13 + 1) for i in range(120)]
    root = tmp_path / "in"
    root.mkdir()
    path = root / "big.txt"

    def splits():
        data = DataConfig(input=str(root), exclude=(), eval_fraction=0.3, document="separator",
                          separator="\n\n")
        return {d.text: split for split, d in single_process.read_split_documents(data)}

    path.write_bytes(b"\n\n".join(texts))
    before = splits()
    path.write_bytes(b"\n\n".join([b"an edited first paragraph, longer than before"] + texts[1:]))
    after = splits()
    common = set(before) & set(after)
    assert len(common) == len(texts) - 1
    assert {t: before[t] for t in common} == {t: after[t] for t in common}
    assert {before[t] for t in common} == {"train", "eval"}


def test_content_key_normalizes_line_ends_and_surrounding_space():
    assert docs.content_key(b"a\r\nb\n") == docs.content_key(b"  a\nb")
    assert docs.content_key(b"a b") != docs.content_key(b"a  b")
