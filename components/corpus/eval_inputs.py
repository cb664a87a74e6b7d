"""The evaluation inputs checked before the first stage: every `eval.sets[].input` and every
`data.decontaminate.eval_files` entry is resolved (components/storage/listing.py resolve_files, the
one rule data.input follows) and each of its files opened, so that a typo, an unreadable or
truncated file, or a file holding no document is a ConfigError (exit 2) naming the setting, the
set and the file, never a traceback in the data stage nor a failure after the Trainer.

What "opened" means (the evaluation-file format: components/corpus/contamination.py eval_texts):
a `.gz` file up to GZIP_READ_WHOLE_BYTES is decompressed to its end (a truncated or corrupt
gzip is found); a larger one only far enough to find its first document, so its cost stays
bounded (a truncation past that point is found by the stage that reads it). A `.jsonl`/`.json`
file is parsed line by line up to its first record holding a non-blank string; any other file
up to its first non-blank byte. Memory: one read block (READ_BYTES) and one line at a time.

`examples:<URI>` entries (the eval split of an Examples artifact, TFRecord shards the data stage
decodes) are listed, not opened; a `home:` entry must have been resolved by the runner first
(runners/local/eval_homes.py)."""

from __future__ import annotations

import gzip
import io
import zlib

from components.storage import fs, listing
from components.config.cleaning import EXAMPLES_PREFIX, HOME_PREFIX
from components.config.tree import ConfigError
from components.corpus.contamination import jsonl_texts

GZIP_READ_WHOLE_BYTES = 64 * 2**20   # a .gz up to 64 MiB is decompressed to its end
READ_BYTES = 2**20


def check_eval_inputs(config) -> int:
    """Resolve and open every evaluation input of a resolved Config (eval.sets first: a set's
    input that decontamination also names is checked once, under the set's name). Returns the
    number of files checked; raises ConfigError naming the setting, the set and the file."""
    checked, seen = 0, set()
    for i, held_out in enumerate(config.eval.sets):
        checked += check_pattern(held_out.input, f"eval.sets[{i}] ({held_out.name}).input")
        seen.add(held_out.input)
    for i, pattern in enumerate(config.data.decontaminate.eval_files):
        if pattern not in seen:
            checked += check_pattern(pattern, f"data.decontaminate.eval_files[{i}]")
            seen.add(pattern)
    return checked


def check_pattern(pattern: str, key: str) -> int:
    """Resolve one evaluation pattern and open each of its files; returns how many."""
    if pattern.startswith(HOME_PREFIX):
        raise ConfigError(f"{key} {pattern!r}: a home: entry must be resolved first "
                          "(runners/local/eval_homes.py resolve_eval_homes)")
    examples = pattern.startswith(EXAMPLES_PREFIX)
    try:
        files = listing.resolve_files(pattern[len(EXAMPLES_PREFIX):] if examples else pattern, key)
    except FileNotFoundError as err:
        raise ConfigError(f"{err} (a typo? an evaluation set must name at least one file)") \
            from None
    if not examples:
        for path in files:
            check_eval_file(path, f"{key} {pattern!r}")
    return len(files)


def check_eval_file(path: str, where: str) -> None:
    """Open one evaluation file far enough to find a document (module docstring); ConfigError
    naming `where` (the setting and the set) and the file when it cannot."""
    if not fs.is_remote(path) and listing.regular_size(path) is None:
        raise ConfigError(f"{where}: {path}: not a regular file (a broken link, a FIFO, a socket "
                          "or a device)")
    try:
        found = _has_document(path)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as err:
        what = "truncated gzip" if isinstance(err, EOFError) else type(err).__name__
        raise ConfigError(f"{where}: {path}: cannot be read ({what}: {err})") from None
    except ValueError as err:   # a line that is not JSON
        raise ConfigError(f"{where}: {path}: {err}") from None
    if not found:
        raise ConfigError(f"{where}: {path}: holds no document (no non-blank text"
                          f"{' in any JSON string value' if _is_json(path) else ''})")


def _is_json(path: str) -> bool:
    return (path[:-3] if path.endswith(".gz") else path).endswith((".jsonl", ".json"))


def _has_document(path: str) -> bool:
    with fs.open_file(path, "rb") as raw:
        if not path.endswith(".gz"):
            return _first_document(raw, path)
        size = listing.regular_size(path)
        with gzip.GzipFile(fileobj=raw) as stream:
            found = _first_document(stream, path)
            if size is not None and size <= GZIP_READ_WHOLE_BYTES:
                while stream.read(READ_BYTES):   # to the end: EOFError when truncated
                    pass
            return found


def _first_document(stream, path: str) -> bool:
    """Whether the stream holds a document before its end, read one block or line at a time."""
    if not _is_json(path):
        while block := stream.read(READ_BYTES):
            if block.strip():
                return True
        return False
    lines = io.BufferedReader(_Unclosed(stream), READ_BYTES)
    return any(text.strip() for text in jsonl_texts(lines, "line "))


class _Unclosed(io.RawIOBase):
    """A readable view of a stream that leaves it open (a GzipFile read on to its end after)."""

    def __init__(self, stream):
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._stream.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)
