"""The eval split of an Examples artifact back as text, for decontamination against it: a
data.decontaminate.eval_files entry `examples:<URI>` (the runner writes one for `home:<path>`:
runners/local/eval_homes.py). The executor decodes each such set once, before the Beam pipeline, into
`<this Examples>/eval_sets/eval-set-<i>.jsonl` (one {"text": ...} record per document), an
ordinary evaluation file from then on (components/corpus/contamination.py).

Decoding. The shards hold packed windows (packing.py): within one unit's eval stream window i+1
starts with the last id of window i, and the windows go to the shards in batches of
BATCH_SEQUENCES, each batch whole and in order into one shard (shards.py). Reading a shard in
file order, a window continues the one before it when
  (a) it is not the first window of a batch: batches are counted from the start of the file, a
      new one beginning after BATCH_SEQUENCES windows or after a window that ends in padding
      (the end of a unit's stream), and
  (b) its first id is the previous window's last id.
Continued windows are joined (the shared id once); the ids are cut at BOS, EOS and padding and
each piece is decoded with the artifact's own tokenizer (the one beside its shards, else UTF-8
bytes): one text per document, exactly, with two exceptions:
  - a document crossing a batch boundary (its unit's stream goes on in the next shard) comes
    back as two texts: the n-grams across that boundary are not checked (at most n - 1 per
    BATCH_SEQUENCES windows of one unit's eval stream);
  - a unit's stream ending exactly at a window boundary (no padded window: 1 in seq_len) leaves
    that shard's batch count off until the next padded window: (b) then decides alone, and a
    wrong join can only put two texts of that same eval split together.
Shards that were not packed here (data.format=tfrecord imports) are decoded by (b) alone.

Memory: one batch of records and one joined run of windows (at most one batch) at a time.
"""

from __future__ import annotations

import json
import os
from typing import Iterable, Iterator

import numpy as np

from components.storage import fs
from components.config.cleaning import EXAMPLES_PREFIX
from components.text_example_gen import shards
from components.tokenizer import artifact as tokenizer_artifact

EVAL_SETS_DIR = "eval_sets"


def eval_set_path(examples_uri: str, index: int) -> str:
    """Where the decoded texts of eval_files entry `index` go in this stage's Examples."""
    return os.path.join(examples_uri, EVAL_SETS_DIR, f"eval-set-{index}.jsonl")


def _pieces(parts: list[np.ndarray], tokenizer) -> Iterator[np.ndarray]:
    """The documents of one joined run of windows: the non-empty id runs between special ids."""
    if not parts:
        return
    ids = np.concatenate(parts)
    specials = np.array([tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id])
    cuts = np.flatnonzero(np.isin(ids, specials))
    for begin, end in zip(np.concatenate([[0], cuts + 1]), np.concatenate([cuts, [len(ids)]])):
        if end > begin:
            yield ids[begin:end]


def windows_to_documents(windows: Iterable[np.ndarray], tokenizer,
                         batch: int = shards.BATCH_SEQUENCES) -> Iterator[np.ndarray]:
    """The documents (ids, no specials) of one shard's windows, in file order (module docstring)."""
    joined: list[np.ndarray] = []
    previous, index = None, 0           # index: the next window's place in its batch
    for window in windows:
        if previous is not None and index > 0 and len(window) and window[0] == previous[-1]:
            joined.append(window[1:])
        else:
            yield from _pieces(joined, tokenizer)
            joined = [window]
        ended = len(window) > 0 and window[-1] == tokenizer.pad_id
        index = 0 if ended or index + 1 == batch else index + 1
        previous = window
    yield from _pieces(joined, tokenizer)


def _texts(documents: Iterable[np.ndarray], tokenizer) -> Iterator[bytes]:
    """The documents decoded, those that decode to nothing left out."""
    for ids in documents:
        text = tokenizer.decode(ids)
        if text:
            yield text


def windows_to_texts(windows: Iterable[np.ndarray], tokenizer,
                     batch: int = shards.BATCH_SEQUENCES) -> Iterator[bytes]:
    """The document texts of one shard's windows, in file order (module docstring)."""
    yield from _texts(windows_to_documents(windows, tokenizer, batch), tokenizer)


def eval_split_documents(examples_uri: str, where: str, tokenizer=None) -> Iterator[np.ndarray]:
    """Every document of an Examples artifact's eval split as ids (shards in name order)."""
    files = fs.glob(os.path.join(shards.split_dir(examples_uri, "eval"), "*"))
    if not files:
        raise FileNotFoundError(f"{where}: no eval shards under "
                                f"{shards.split_dir(examples_uri, 'eval')} (not an Examples "
                                "artifact of the data stage?)")
    tokenizer = tokenizer or tokenizer_artifact.examples_tokenizer(examples_uri)
    for path in files:
        yield from windows_to_documents(shards.read_windows(path), tokenizer)


def eval_split_texts(examples_uri: str, where: str) -> Iterator[bytes]:
    """Every document text of an Examples artifact's eval split (shards in name order)."""
    tokenizer = tokenizer_artifact.examples_tokenizer(examples_uri)
    yield from _texts(eval_split_documents(examples_uri, where, tokenizer), tokenizer)


def write_eval_sets(eval_files: tuple[str, ...], examples_uri: str) -> dict[str, tuple[str, ...]]:
    """Decode every `examples:<URI>` entry of data.decontaminate.eval_files into its JSONL file in
    this stage's Examples (eval_set_path); {entry: (that file,)}."""
    written = {}
    for index, entry in enumerate(eval_files):
        if not entry.startswith(EXAMPLES_PREFIX):
            continue
        where = f"data.decontaminate.eval_files[{index}] ({entry})"
        path = eval_set_path(examples_uri, index)
        fs.makedirs(os.path.dirname(path))
        with fs.open_file(path, "w") as out:
            for text in eval_split_texts(entry[len(EXAMPLES_PREFIX):], where):
                out.write(json.dumps({"text": text.decode("utf-8", "replace")}) + "\n")
        written[entry] = (path,)
    return written
