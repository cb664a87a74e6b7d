"""The one input listing: which files `data.input` names, and the two digests of them.

`list_input_files` is what the data stage, TokenizerGen and the up-to-date check all list (the same
expansion of `<stdlib>`, the same excludes, the same order); `input_fingerprint` is the content
digest a stage's cache keys on; `input_signature` is the cheap (stat-only) check `bigtrain run` uses
to decide whether to start the pipeline at all.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import os
import stat
import sysconfig
from typing import Iterable

UNRESOLVED = "unresolved-at-compile-time"
# Listing metadata of remote objects, path -> (size, last modified seconds), filled by the listing
# (one request per page of objects, never one per object) and read by regular_size and the digests.
_REMOTE_METADATA: dict[str, tuple[int, float]] = {}


def expand_input(spec: str) -> str:
    """`<stdlib>` -> the running interpreter's standard library (the default corpus)."""
    return spec.replace("<stdlib>", sysconfig.get_paths()["stdlib"])


def is_remote(spec: str) -> bool:
    return "://" in spec


def beam_filesystems():
    """Beam's FileSystems, with pipeline options set when no pipeline has set them yet (outside a
    pipeline Beam's S3 filesystem refuses to work without them). The S3 client is boto3's: it reads
    the endpoint (AWS_ENDPOINT_URL), region and credentials from the environment."""
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions
    if FileSystems._pipeline_options is None:  # no public getter in Beam 2.59
        FileSystems.set_options(PipelineOptions([]))
    return FileSystems


def regular_size(path: str) -> int | None:
    """Size of a regular file (following symlinks), else None. Never opens the file. An object
    in a store (s3://, gs://) is always regular: its size comes from the listing metadata."""
    if is_remote(path):
        if path in _REMOTE_METADATA:
            return _REMOTE_METADATA[path][0]
        FileSystems = beam_filesystems()
        try:
            matched = FileSystems.match([path], limits=[1])[0].metadata_list
        except Exception:  # noqa: BLE001 (Beam raises BeamIOError with the cause inside)
            return None
        return matched[0].size_in_bytes if matched else None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def list_input_files(spec: str, exclude: Iterable[str] = ()) -> tuple[str, list[tuple[str, str]]]:
    """Resolve a directory or glob to (root, sorted [(relative_path, absolute_path)]).

    Broken symlinks, FIFOs, sockets and devices are kept (they are quarantined later, not lost;
    nothing here opens them); directories are not files. Raises FileNotFoundError naming the spec
    when nothing matches.
    """
    pattern = expand_input(spec)
    if is_remote(pattern):
        return list_remote_files(spec, pattern, exclude)
    if os.path.isdir(pattern):
        root = os.path.abspath(pattern)
        pattern = os.path.join(root, "**", "*")
    else:
        prefix = pattern.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0]
        root = os.path.abspath(prefix if prefix.endswith(os.sep) else os.path.dirname(prefix))
    paths = []
    for path in glob.glob(pattern, recursive=True):
        path = os.path.abspath(path)
        if os.path.isdir(path):
            continue
        if any(fnmatch.fnmatch(path, pat) for pat in exclude):
            continue
        paths.append((os.path.relpath(path, root), path))
    if not paths:
        raise FileNotFoundError(f"data.input {spec!r} (expanded to {pattern!r}) matches no files")
    return root, sorted(paths)


def list_remote_files(spec: str, pattern: str, exclude: Iterable[str] = ()
                      ) -> tuple[str, list[tuple[str, str]]]:
    """An object-store prefix or glob through Beam's FileSystems.match (listing metadata only):
    a spec without glob characters is a folder: everything under it."""
    from components.common.errors import ObjectStoreError
    FileSystems = beam_filesystems()
    if not any(c in pattern for c in "*?["):
        root = pattern.rstrip("/")
        pattern = root + "/**"
    else:
        prefix = pattern.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0]
        root = prefix.rstrip("/") if prefix.endswith("/") else prefix.rsplit("/", 1)[0]
    from components.common import fs
    # First one bounded request (boto3: 5 s connect, 3 attempts): Beam's own listing retries an
    # unreachable endpoint with exponential backoff for many minutes, and reports a missing
    # bucket as "no objects".
    fs.check_bucket(pattern)
    try:
        matched = FileSystems.match([pattern])[0].metadata_list
    except Exception as err:  # noqa: BLE001 (BeamIOError wraps the store's error)
        raise ObjectStoreError(f"listing data.input {spec!r} ({pattern}) failed: {err}") from None
    for m in matched:
        _REMOTE_METADATA[m.path] = (m.size_in_bytes, float(m.last_updated_in_seconds or 0))
    paths = [(m.path[len(root) + 1:], m.path) for m in matched
             if not m.path.endswith("/") and not any(fnmatch.fnmatch(m.path, p) for p in exclude)]
    if not paths:
        raise FileNotFoundError(f"data.input {spec!r} (expanded to {pattern!r}) matches no files")
    return root, sorted(paths)


def input_fingerprint(files: list[tuple[str, str]]) -> str:
    """Content digest of the input: sha256 over (relative path, sha256 of bytes) of every file.

    Modification times play no part: touching a file changes nothing, editing one byte does.
    Objects in a store (s3://, gs://) enter by (size, last-modified) from the listing instead of
    their bytes: re-uploading an object counts as a change (docs/operations.md)."""
    outer = hashlib.sha256()
    for relative, absolute in files:
        inner = hashlib.sha256()
        if is_remote(absolute):  # an object store: listing metadata, never the bytes
            size, mtime = _REMOTE_METADATA.get(absolute, (None, None))
            outer.update(f"{relative}\0remote:{size}:{mtime}\n".encode("utf-8", "surrogateescape"))
            continue
        if regular_size(absolute) is None:  # never open a FIFO, socket or device
            outer.update(f"{relative}\0not-regular\n".encode("utf-8", "surrogateescape"))
            continue
        try:
            with open(absolute, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    inner.update(block)
            file_digest = inner.hexdigest()
        except OSError as err:
            file_digest = f"unreadable:{err.errno}"
        outer.update(f"{relative}\0{file_digest}\n".encode("utf-8", "surrogateescape"))
    return outer.hexdigest()


def fingerprint_input(data) -> str:
    """The content fingerprint of a DataConfig's input, or UNRESOLVED when the input is not
    visible where the pipeline is built (a volume mounted only in the cluster): the executor still
    records the real fingerprint, but the cache cannot notice edited input (docs/operations.md)."""
    try:
        _, files = list_input_files(data.input, data.exclude)
    except FileNotFoundError:
        return UNRESOLVED
    return input_fingerprint(files)


def input_signature(data) -> str:
    """sha256 over (path, size, mtime) of every listed input file: stats, no reads. A touched file
    changes it, so the pipeline runs; the data stage's content fingerprint then keeps it cached."""
    digest = hashlib.sha256(expand_input(data.input).encode())
    try:
        _, files = list_input_files(data.input, data.exclude)
    except FileNotFoundError:
        return digest.hexdigest()
    for _, path in files:
        if is_remote(path):
            size, mtime = _REMOTE_METADATA.get(path, (None, None))
            digest.update(f"{path}\0{size}\0{mtime}\n".encode("utf-8", "surrogateescape"))
            continue
        try:
            st = os.stat(path)
        except OSError:
            digest.update(f"{path}\0missing\n".encode("utf-8", "surrogateescape"))
            continue
        digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()
