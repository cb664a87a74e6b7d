"""The one input listing: which files `data.input` names, and the two digests of them.

`list_input_files` is what the data stage, TokenizerGen and the up-to-date check all list (the same
expansion of `<stdlib>`, the same excludes, the same order); `input_fingerprint` is the metadata
digest (path, size, mtime: no bytes read) a stage's cache keys on; `input_signature` adds the input
spec to it for the check `bigtrain run` uses to decide whether to start the pipeline at all.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import json
import os
import stat
import sysconfig
from typing import Iterable, Iterator

from components.storage.fs import is_remote
from components.config.cleaning import EXAMPLES_PREFIX, HOME_PREFIX

UNRESOLVED = "unresolved-at-compile-time"
# Listing metadata of remote objects, path -> (size, last modified seconds), filled by the listing
# (one request per page of objects, never one per object) and read by regular_size and the digests.
_REMOTE_METADATA: dict[str, tuple[int, float]] = {}


# bigtrain's shipped held-out sets (components/config/heldout.py names the token and the default).
HELDOUT_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "evaluation", "heldout")


def expand_input(spec: str) -> str:
    """`<stdlib>` -> the running interpreter's standard library (the default corpus);
    `<heldout>` -> the folder of bigtrain's shipped held-out sets."""
    return spec.replace("<stdlib>", sysconfig.get_paths()["stdlib"]).replace("<heldout>", HELDOUT_DIR)


def beam_filesystems():
    """Beam's FileSystems, with pipeline options set when no pipeline has set them yet (outside a
    pipeline Beam's S3 filesystem refuses to work without them). The S3 client is boto3's: it reads
    the endpoint (AWS_ENDPOINT_URL), region and credentials from the environment."""
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions
    if FileSystems._pipeline_options is None:  # no public getter in Beam 2.72
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


def resolve_files(spec: str, key: str) -> list[str]:
    """The one input resolver: the sorted files a pattern names (absolute paths or URIs), for
    data.input, data.sources, eval.sets[].input, data.decontaminate.eval_files and the held-out
    fingerprint alike; list_input_files without the relative paths. key: the setting an error
    names (FileNotFoundError when nothing matches)."""
    return [absolute for _, absolute in list_input_files(spec, (), key)[1]]


def list_input_files(spec: str, exclude: Iterable[str] = (), key: str = "data.input"
                     ) -> tuple[str, list[tuple[str, str]]]:
    """Resolve a file, a directory or a glob, local or in an object store, to (root, sorted
    [(relative_path, absolute_path)]), by one rule (docs/data.md): a folder is `<folder>/**/*`;
    `*`, `?` and `[...]` match within one name, `**` any number of folders (none too); hidden
    names only when the pattern's name starts with a dot; `<stdlib>`, `<heldout>` expanded.

    Broken symlinks, FIFOs, sockets and devices are kept (they are quarantined later, not lost;
    nothing here opens them); directories are not files. Raises FileNotFoundError naming the spec
    when nothing matches.
    """
    pattern = expand_input(spec)
    if is_remote(pattern):
        return list_remote_files(spec, pattern, exclude, key)
    if os.path.isdir(pattern):
        root = os.path.abspath(pattern)
        pattern = os.path.join(root, "**", "*")
    else:
        prefix = pattern.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0]
        root = os.path.abspath(prefix if prefix.endswith(os.sep) else os.path.dirname(prefix))
    paths = []
    for path in expand_pattern(os.path.abspath(pattern)):
        if os.path.isdir(path):
            continue
        if any(fnmatch.fnmatch(path, pat) for pat in exclude):
            continue
        paths.append((os.path.relpath(path, root), path))
    if not paths:
        raise FileNotFoundError(f"{key} {spec!r} (expanded to {pattern!r}) matches no files")
    return root, sorted(paths)


def expand_pattern(pattern: str) -> list[str]:
    """Paths matching an absolute glob pattern, with glob's rules (`*`, `?`, `[...]` within one
    name, `**` any depth, hidden names only when the pattern's name starts with a dot), except
    that `**` descends into each directory once: a directory reached again by a link (DIR/sub/
    parent -> ..) is recognised by (st_dev, st_ino) and not entered, so the listing ends after
    one visit of every directory instead of recursing until path names overflow."""
    parts = pattern.split(os.sep)
    return list(_expand(parts[0] + os.sep, [p for p in parts[1:] if p]))


def _expand(base: str, parts: list[str]) -> Iterable[str]:
    if not parts:
        yield base
        return
    part, rest = parts[0], parts[1:]
    if part == "**":
        for directory in _directories_once(base):
            yield from _expand(directory, rest)
            if not rest:  # a final `**` matches the files too
                yield from (os.path.join(directory, name) for name in _names(directory)
                            if not name.startswith("."))
    elif glob.has_magic(part):
        for name in _names(base):
            if (not name.startswith(".") or part.startswith(".")) and fnmatch.fnmatchcase(name, part):
                yield from _expand(os.path.join(base, name), rest)
    else:
        path = os.path.join(base, part)
        if os.path.lexists(path) if not rest else os.path.isdir(path):
            yield from _expand(path, rest)


def _directories_once(top: str) -> Iterable[str]:
    """`top` and every directory under it, links followed, hidden names skipped like glob's
    `**`; each directory (by device and inode) at most once."""
    seen: set[tuple[int, int]] = set()
    pending = [top]
    while pending:
        directory = pending.pop()
        try:
            st = os.stat(directory)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen or not stat.S_ISDIR(st.st_mode):
            continue
        seen.add((st.st_dev, st.st_ino))
        yield directory
        pending.extend(os.path.join(directory, name) for name in sorted(_names(directory), reverse=True)
                       if not name.startswith("."))


def _names(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:  # not a directory, unreadable, vanished: glob skips it too
        return []


def list_remote_files(spec: str, pattern: str, exclude: Iterable[str] = (), key: str = "data.input"
                      ) -> tuple[str, list[tuple[str, str]]]:
    """An object-store file, prefix or glob through Beam's FileSystems.match (listing metadata
    only), by the local rule: Beam's own globbing differs (its `**` needs at least one folder, its
    `?` matches `/`), so every object under the pattern's literal prefix is listed and matched
    here (remote_matches). A spec without glob characters is one object when it exists, else a
    folder: `<folder>/**/*`."""
    FileSystems = beam_filesystems()
    magic = any(c in pattern for c in "*?[")
    prefix = pattern.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0] if magic else pattern
    root = prefix.rstrip("/") if not magic or prefix.endswith("/") else prefix.rsplit("/", 1)[0]
    relative = pattern[len(root) + 1:] if magic else "**/*"
    from components.storage import fs
    # First one bounded request (boto3: 5 s connect, 3 attempts): Beam's own listing retries an
    # unreachable endpoint with exponential backoff for many minutes, and reports a missing
    # bucket as "no objects".
    fs.check_bucket(pattern)
    whole_bucket = "/" not in root.partition("://")[2]
    single = [] if magic or whole_bucket else [m for m in _remote_match(FileSystems, root, spec, key)
                                               if not m.path.endswith("/")]
    if single:   # one object: its folder is the root
        root, relative = root.rsplit("/", 1)
    # Listed by the pattern's literal prefix, as Beam would: never more objects than its glob.
    matched = single or _remote_match(FileSystems, (prefix if magic else root + "/") + "**", spec,
                                      key)
    paths = [(m.path[len(root) + 1:], m.path) for m in matched
             if not m.path.endswith("/") and remote_matches(m.path[len(root) + 1:], relative)
             and not any(fnmatch.fnmatch(m.path, p) for p in exclude)]
    if not paths:
        raise FileNotFoundError(f"{key} {spec!r} (expanded to {root + '/' + relative!r}) matches "
                                "no files")
    return root, sorted(paths)


def _remote_match(FileSystems, pattern: str, spec: str, key: str) -> list:
    """FileSystems.match of one pattern; its objects' metadata kept for the digests."""
    from components.common.errors import ObjectStoreError
    try:
        matched = FileSystems.match([pattern])[0].metadata_list
    except Exception as err:  # noqa: BLE001 (BeamIOError wraps the store's error)
        raise ObjectStoreError(f"listing {key} {spec!r} ({pattern}) failed: {err}") from None
    for m in matched:
        _REMOTE_METADATA[m.path] = (m.size_in_bytes, float(m.last_updated_in_seconds or 0))
    return matched


def remote_matches(relative: str, pattern: str) -> bool:
    """Whether an object's path under the root matches a relative pattern by expand_pattern's
    rule: `*`, `?`, `[...]` within one name; `**` any number of folders, none too (a final `**`:
    any file below); hidden names only where the pattern's name starts with a dot."""
    return _matches(relative.split("/"), [p for p in pattern.split("/") if p])


def _matches(names: list[str], parts: list[str]) -> bool:
    if not parts or not names:
        return not parts and not names
    part, rest = parts[0], parts[1:]
    if part == "**":
        for k in range(len(names) + 1):
            if k and names[k - 1].startswith("."):
                return False
            if (_matches(names[k:], rest) if rest else k == len(names)):
                return True
        return False
    if glob.has_magic(part):
        found = (not names[0].startswith(".") or part.startswith(".")) and \
            fnmatch.fnmatchcase(names[0], part)
    else:
        found = names[0] == part
    return found and _matches(names[1:], rest)


def _metadata(path: str) -> str:
    """What the fingerprint keys a file on: size and modification time from the listing (remote)
    or one stat (local): never the bytes."""
    if is_remote(path):  # filled by list_remote_files from the same listing request
        size, mtime = _REMOTE_METADATA.get(path, (None, None))
        return f"remote:{size}:{mtime}"
    try:
        st = os.stat(path)  # follows symlinks; a FIFO/socket/device is never opened
    except OSError as err:
        return f"missing:{err.errno}"
    if not stat.S_ISREG(st.st_mode):
        return "not-regular"
    return f"{st.st_size}:{st.st_mtime_ns}"


def input_fingerprint(files: list[tuple[str, str]]) -> str:
    """The input's fingerprint: sha256 over (relative path, size, modification time) of every
    listed file, from listing metadata only (FileSystems.match for s3://, gs://; one stat per local
    file), never reading bytes: at a terabyte a content hash costs hours before the first stage.

    The rule (docs/operations.md): adding, removing, resizing or re-writing a file (a new mtime,
    or a re-uploaded object) changes it; touching a file changes it too (the data stage re-runs
    and writes byte-identical shards); an edit that keeps both size and mtime goes unnoticed."""
    outer = hashlib.sha256()
    for relative, absolute in files:
        outer.update(f"{relative}\0{_metadata(absolute)}\n".encode("utf-8", "surrogateescape"))
    return outer.hexdigest()


def list_sources(data) -> list[tuple[object, str, list[tuple[str, str]]]]:
    """(source, root, files) for every source of a DataConfig's mixture (data.sources, or the one
    source data.input stands for: DataConfig.mixture), each listed by list_input_files."""
    def key(i, source):   # the setting an error names: data.input, or the mixture's entry
        return f"data.sources[{i}] ({source.name}).input" if data.sources else "data.input"
    return [(source, *list_input_files(source.input, source.exclude, key(i, source)))
            for i, source in enumerate(data.mixture())]


def fingerprint_input(data) -> str:
    """The fingerprint of a DataConfig's input, or UNRESOLVED when the input is not visible where
    the pipeline is built (a volume mounted only in the cluster): the executor then records the
    real fingerprint, but the cache cannot notice edited input (docs/operations.md). The one
    place a pipeline's fingerprint is computed: each runner calls it once, where it starts
    (runners/local/run.py, kubeflow.py, airflow.py), and hands the value to create_pipeline and the
    up-to-date check; nothing below recomputes it. A mixture's: sources_fingerprint."""
    try:
        listed = list_sources(data)
    except FileNotFoundError:
        return UNRESOLVED
    return sources_fingerprint(data, listed)


def sources_fingerprint(data, listed) -> str:
    """The one-source shorthand: input_fingerprint of its files (the value before mixtures
    existed, so caches stay valid); data.sources: sha256 over each source's name and
    input_fingerprint, in config order. The files of data.decontaminate.eval_files are in it
    (eval_set_files), so editing an evaluation set re-runs the data stage."""
    eval_sets = eval_set_files(data)
    if not data.sources:
        return input_fingerprint(listed[0][2] + eval_sets)
    outer = hashlib.sha256()
    for source, _, files in listed:
        outer.update(f"{source.name}\0{input_fingerprint(files)}\n".encode("utf-8"))
    if eval_sets:
        outer.update(f"\0eval-sets\0{input_fingerprint(eval_sets)}\n".encode("utf-8"))
    return outer.hexdigest()


def eval_set_files(data) -> list[tuple[str, str]]:
    """The files of data.decontaminate.eval_files, keyed by their pattern: in the fingerprint,
    so editing an evaluation set re-runs the data stage like editing its input. An
    `examples:<URI>` entry: every file of that Examples artifact (its eval shards among them); a
    `home:` entry must have been resolved into one first (runners/local/eval_homes.py)."""
    files = []
    for i, pattern in enumerate(getattr(getattr(data, "decontaminate", None), "eval_files", ())):
        if pattern.startswith(HOME_PREFIX):
            raise ValueError(f"data.decontaminate.eval_files[{i}]: {pattern!r}: resolve it "
                             "(runners/local/eval_homes.py) before fingerprinting")
        _, listed = list_input_files(pattern[len(EXAMPLES_PREFIX):]
                                     if pattern.startswith(EXAMPLES_PREFIX) else pattern, (),
                                     f"data.decontaminate.eval_files[{i}]")
        files += [(f"eval-set {pattern}: {relative}", absolute) for relative, absolute in listed]
    return files


def input_signature(data, fingerprint: str) -> str:
    """What the up-to-date check compares: the expanded input specs and their fingerprint (the
    run's one value, fingerprint_input)."""
    spec = "\0".join(f"{s.name}={expand_input(s.input)}" for s in data.sources) \
        if data.sources else expand_input(data.input)
    return hashlib.sha256(f"{spec}\0{fingerprint}".encode(
        "utf-8", "surrogateescape")).hexdigest()


# ----------------------------------------------------------------------------------------------
# The listing the data stage records in its Examples artifact: one JSON line per input file
# (source, path, size, mtime), so lineage can answer which models a file went into and the time
# span of each source without holding 100k paths in MLMD properties.

LISTING_FILE = "input_files.jsonl"


def file_metadata(path: str) -> tuple[int | None, float | None]:
    """(size, modification time in seconds) from the listing (remote) or one stat (local)."""
    if is_remote(path):
        return _REMOTE_METADATA.get(path, (None, None))
    try:
        st = os.stat(path)
    except OSError:
        return None, None
    return (st.st_size if stat.S_ISREG(st.st_mode) else None), st.st_mtime


def listing_records(source_name: str, files: list[tuple[str, str]]) -> Iterator[dict]:
    """The listing's records for one source's files: source, path, relative, size, mtime."""
    for relative, absolute in files:
        size, mtime = file_metadata(absolute)
        yield {"source": source_name, "path": absolute, "relative": relative, "size": size,
               "mtime": mtime}


def read_listing(text: str) -> Iterator[dict]:
    for line in text.splitlines():
        if line.strip():
            yield json.loads(line)


def same_file(a: str, b: str) -> bool:
    """Whether two listed paths or URIs name one file (local paths normalized, URIs as written)."""
    if is_remote(a) or is_remote(b):
        return a.rstrip("/") == b.rstrip("/")
    return os.path.normpath(os.path.abspath(a)) == os.path.normpath(os.path.abspath(b))
