"""The one file-system seam outside Beam code: every read, write, list, rename and delete of an
artifact, a checkpoint summary, a counters file, a tokenizer file, a schema or a pushed model goes
through these functions, so the same code works on a local disk and on object stores (s3://,
gs://). Beam code uses `apache_beam.io.filesystems.FileSystems` instead (listing.py, shards.py,
readers.py); tests/test_io_seam.py fails when a product module bypasses both.

Remote paths go through `tf.io.gfile`; `s3://` needs tensorflow-io's filesystem, registered by
`import tensorflow_io` (done here, lazily, on the first s3:// path). Local paths go through the
standard library: same semantics, and a Beam worker that only reads a tokenizer need not import
TensorFlow. A remote failure that is not "no such object" (endpoint unreachable, no bucket,
no credentials, access denied) raises ObjectStoreError naming the URI, with a one-line message
(no TensorFlow stack). tensorflow-io answers "does not exist" when it cannot reach the endpoint at
all, so a negative remote answer (exists, isdir, listdir, not found) is confirmed with one bounded
boto3 request to the bucket before it is believed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import posixpath
import shutil
import uuid
from typing import IO, Callable, Iterator

from components.common.errors import ObjectStoreError
# S3_CLIENT_DEFAULTS stays readable here as fs.S3_CLIENT_DEFAULTS (its home: s3_bounds.py)
from components.storage.s3_bounds import S3_CLIENT_DEFAULTS, bound_s3_retries, s3_timeouts  # noqa: F401

# Longest part of a client's message kept in an ObjectStoreError (TensorFlow's op errors carry
# the graph's whole Python stack after the first line).
_MESSAGE_CHARS = 200


def is_remote(path: str) -> bool:
    """True for a URI with a scheme (s3://, gs://, hdfs://): not a local path."""
    return "://" in str(path)


def absolute(path: str) -> str:
    """A local path made absolute (TF Serving's base paths must be); a URI unchanged."""
    return path if is_remote(path) else os.path.abspath(path)


def join(base: str, *parts: str) -> str:
    return posixpath.join(base, *parts) if is_remote(base) else os.path.join(base, *parts)


@functools.cache
def _load_s3() -> None:
    bound_s3_retries()
    import tensorflow_io  # noqa: F401  (registers the s3:// filesystem with tf.io.gfile)


def s3_loaded() -> bool:
    return _load_s3.cache_info().currsize > 0


def exit_process(code: int) -> None:
    """End a process that may have used s3:// without running C++ static destructors:
    tensorflow-io 0.37.1's S3 client aborts the interpreter at exit ("pure virtual method called",
    status 134; tensorflow/io#2039, fixed upstream after the last release for TF 2.16). Flushes
    logs and stdio first. Only for a process's last step (the CLI's console script, pytest)."""
    if not s3_loaded():
        return
    import logging
    import sys
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def prepare(*paths: str) -> None:
    """Register the filesystems these paths need (call early: TFX's own gfile calls need them)."""
    if any(str(p).startswith("s3://") for p in paths):
        _load_s3()


def _gfile(path: str):
    prepare(path)
    import tensorflow as tf
    return tf.io.gfile


def short_message(message: str) -> str:
    """The first meaningful line of a client's error message, at most _MESSAGE_CHARS: without
    TensorFlow's `{{function_node ...}}` prefix and the graph stack that follows it."""
    import re
    text = re.sub(r"\{\{function_node [^}]*\}\}", "", message or "")
    text = re.sub(r"\s*\[Op:\w+\].*", "", text, flags=re.S)
    text = re.sub(r":\s+:", ":", text)  # "UnknownError:  : curlCode" once the prefix is gone
    lines = [line.strip(" :") for line in text.splitlines() if line.strip(" :")]
    first = lines[0] if lines else "no message"
    return first if len(first) <= _MESSAGE_CHARS else first[:_MESSAGE_CHARS] + "..."


def confirm_reachable(op: str, path: str) -> None:
    """ObjectStoreError naming path when its store cannot be reached (or its bucket is missing or
    forbidden): tensorflow-io reports an unreachable endpoint as "does not exist" (its Stat ignores
    failed requests), so a negative remote answer is checked before it is believed. One boto3
    request (bounded, _s3_client); only s3:// is checked."""
    try:
        check_bucket(path)
    except ObjectStoreError as err:
        raise ObjectStoreError(f"{op} {err} (check the endpoint, the bucket and the credentials)"
                               ) from None


@contextlib.contextmanager
def _remote(op: str, path: str):
    """Map TensorFlow's filesystem errors to FileNotFoundError / ObjectStoreError with the URI."""
    import tensorflow as tf
    try:
        yield
    except tf.errors.NotFoundError as err:
        if "NoSuchBucket" in (err.message or ""):
            raise ObjectStoreError(f"{op} {path} failed: no such bucket (check the URI and the "
                                   f"endpoint)") from None
        confirm_reachable(op, path.split(" -> ")[0])
        raise FileNotFoundError(f"{op} {path}: {short_message(err.message)}") from None
    except tf.errors.OpError as err:
        raise ObjectStoreError(f"{op} {path} failed: {type(err).__name__}: "
                               f"{short_message(err.message)} (check the endpoint, the bucket and "
                               f"the credentials)") from None


def exists(path: str) -> bool:
    return _probe("exists", os.path.exists, path)


def isdir(path: str) -> bool:
    return _probe("isdir", os.path.isdir, path)


def _probe(op: str, local: Callable[[str], bool], path: str) -> bool:
    """`local(path)` on a local path; on a remote one, gfile's method of the same name, and a
    False answer checked against the store being reachable (not found, not unreachable)."""
    if not is_remote(path):
        return local(path)
    with _remote(op, path):
        found = getattr(_gfile(path), op)(path)
    if not found:
        confirm_reachable(op, path)
    return found


def makedirs(path: str) -> None:
    if not is_remote(path):
        os.makedirs(path, exist_ok=True)
        return
    with _remote("makedirs", path):
        _gfile(path).makedirs(path)


def listdir(path: str) -> list[str]:
    """Names directly under path (no trailing slashes), sorted; [] when path does not exist."""
    if not is_remote(path):
        return sorted(os.listdir(path)) if os.path.isdir(path) else []
    if not isdir(path):
        return []
    with _remote("listdir", path):
        return sorted(name.rstrip("/") for name in _gfile(path).listdir(path))


def glob(pattern: str) -> list[str]:
    if not is_remote(pattern):
        import glob as glob_lib
        return sorted(glob_lib.glob(pattern))
    with _remote("glob", pattern):
        found = sorted(_gfile(pattern).glob(pattern))
    if not found:
        confirm_reachable("glob", pattern)
    return found


def walk_files(top: str) -> Iterator[str]:
    """Every file under top as a path relative to top ('/'-separated), sorted."""
    found = []
    if not is_remote(top):
        for root, _, names in os.walk(top):
            found += [os.path.relpath(os.path.join(root, n), top) for n in names]
    else:
        with _remote("walk", top):
            for root, _, names in _gfile(top).walk(top):
                rel = root[len(top.rstrip("/")):].strip("/")
                found += [posixpath.join(rel, n.rstrip("/")) for n in names if not n.endswith("/")]
        if not found:  # tf.io.gfile.walk yields nothing when the store does not answer
            confirm_reachable("walk", top)
    return iter(sorted(found))


def size(path: str) -> int:
    if not is_remote(path):
        return os.path.getsize(path)
    with _remote("stat", path):
        return _gfile(path).stat(path).length


@contextlib.contextmanager
def open_file(path: str, mode: str = "r", encoding: str = "utf-8") -> Iterator[IO]:
    """open(); on a remote path a tf.io.gfile.GFile (text modes decode as UTF-8)."""
    if not is_remote(path):
        with open(path, mode, encoding=None if "b" in mode else encoding) as fh:
            yield fh
        return
    with _remote("open", path):
        with _gfile(path).GFile(path, mode) as fh:
            yield fh


def read_bytes(path: str) -> bytes:
    with open_file(path, "rb") as fh:
        return fh.read()


def read_text(path: str) -> str:
    with open_file(path, "r") as fh:
        return fh.read()


def write_bytes(path: str, data: bytes) -> None:
    """Write via a unique temporary name and rename: a reader never sees half a file (locally;
    on S3 a single PUT is already all-or-nothing)."""
    if is_remote(path):
        with open_file(path, "wb") as fh:
            fh.write(data)
        return
    tmp = f"{path}.tmp-{uuid.uuid4().hex}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:   # a full disk: no temporary file left beside path
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


def write_text(path: str, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def create_exclusive(path: str, data: bytes) -> bool:
    """Create path holding data only if it does not exist (one atomic step: O_EXCL locally,
    `If-None-Match: *` on S3, `ifGenerationMatch=0` on GCS); False if it already exists."""
    if not is_remote(path):
        # Written under a private name, then hard-linked into place (link fails if the name
        # exists): an O_EXCL create would show a reader the file before its bytes are written.
        private = f"{path}.{uuid.uuid4().hex}.tmp"
        try:
            with open(private, "wb") as fh:
                fh.write(data)
            os.link(private, path)
        except FileExistsError:
            return False
        finally:   # also after a full disk: no private file left beside path
            with contextlib.suppress(FileNotFoundError):
                os.remove(private)
        return True
    scheme, _, rest = path.partition("://")
    bucket, _, key = rest.partition("/")
    if scheme == "s3":
        return _s3_create_exclusive(path, bucket, key, data)
    if scheme == "gs":  # not exercised by the tests (no GCS server here)
        from google.api_core.exceptions import PreconditionFailed
        from google.cloud import storage
        try:
            storage.Client().bucket(bucket).blob(key).upload_from_string(data, if_generation_match=0)
        except PreconditionFailed:
            return False
        return True
    raise ObjectStoreError(f"no conditional create for {scheme}:// (needed by {path})")


def s3_put(path: str, data: bytes) -> None:
    """One PUT of a small object with boto3. For an empty object: Beam's S3 writer always makes a
    multipart upload, and one with no parts is rejected (MalformedXML)."""
    bucket, _, key = path.partition("://")[2].partition("/")
    _s3_put(path, bucket, key, data)


def check_bucket(uri: str) -> None:
    """ObjectStoreError naming the URI when its bucket is missing, unreachable or forbidden (Beam's
    S3 listing reports all of these as "no objects"). Only s3:// is checked."""
    if not uri.startswith("s3://"):
        return
    import botocore.exceptions
    bucket = uri.partition("://")[2].partition("/")[0]
    try:
        _s3_client().head_bucket(Bucket=bucket)
    except botocore.exceptions.ClientError as err:
        code = err.response.get("Error", {}).get("Code")
        what = {"404": "no such bucket", "NoSuchBucket": "no such bucket",
                "403": "access denied (check the credentials)"}.get(code, str(err))
        raise ObjectStoreError(f"{uri}: {what}") from None
    except botocore.exceptions.BotoCoreError as err:
        raise ObjectStoreError(f"{uri}: {err}") from None


def _s3_client():
    """boto3 (Beam's S3 client too): AWS_ENDPOINT_URL names a non-AWS endpoint. Bounded by the
    settings tensorflow-io reads (s3_timeouts): S3_CONNECT_TIMEOUT_MSEC to connect,
    S3_REQUEST_TIMEOUT_MSEC for each read, AWS_MAX_ATTEMPTS attempts in AWS_RETRY_MODE
    (S3_CLIENT_DEFAULTS: 5 s, 60 s, 3 attempts; s3_unanswered_bound_s)."""
    connect, request, _ = s3_timeouts()
    import boto3
    import botocore.config
    # A new session each time: boto3.client() reuses one default session, whose credentials are
    # resolved once per process (a later change of the environment would go unseen). No retries
    # in the Config: it would override AWS_MAX_ATTEMPTS (and its max_attempts counts retries,
    # not attempts: {"max_attempts": 3} made 4).
    return boto3.session.Session().client("s3", config=botocore.config.Config(
        connect_timeout=connect, read_timeout=request))


def _s3_put(path: str, bucket: str, key: str, data: bytes, **conditions) -> None:
    import botocore.exceptions
    try:
        _s3_client().put_object(Bucket=bucket, Key=key, Body=data, **conditions)
    except botocore.exceptions.BotoCoreError as err:
        raise ObjectStoreError(f"put {path} failed: {err}") from None


def _s3_create_exclusive(path: str, bucket: str, key: str, data: bytes) -> bool:
    """tensorflow-io's S3 filesystem cannot make a conditional PUT: boto3 does."""
    import botocore.exceptions
    try:
        _s3_put(path, bucket, key, data, IfNoneMatch="*")
    except botocore.exceptions.ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict"):
            return False
        raise ObjectStoreError(f"conditional create {path} failed: {err}") from None
    return True


def copy(source: str, destination: str, overwrite: bool = True) -> None:
    if not is_remote(source) and not is_remote(destination):
        if not overwrite and os.path.exists(destination):
            raise FileExistsError(destination)
        shutil.copyfile(source, destination)
        return
    with _remote("copy", f"{source} -> {destination}"):
        _gfile(source).copy(source, destination, overwrite=overwrite) if is_remote(source) else \
            _gfile(destination).copy(source, destination, overwrite=overwrite)


def copytree(source: str, destination: str, skip: tuple[str, ...] = ()) -> None:
    """Copy every file under source (but the relative paths in `skip`) to destination."""
    for rel in walk_files(source):
        if rel in skip:
            continue
        target = join(destination, rel)
        makedirs(join(destination, posixpath.dirname(rel)) if posixpath.dirname(rel) else destination)
        copy(join(source, rel), target, overwrite=True)


def rename(source: str, destination: str, overwrite: bool = False) -> None:
    """Rename a file or directory (on S3: copy + delete, not atomic)."""
    if not is_remote(source):
        if overwrite:
            os.replace(source, destination)
        else:
            os.rename(source, destination)
        return
    with _remote("rename", f"{source} -> {destination}"):
        _gfile(source).rename(source, destination, overwrite=overwrite)


def remove(path: str) -> None:
    """Delete one file; a missing file is fine."""
    if not is_remote(path):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        return
    if exists(path):
        with _remote("remove", path):
            _gfile(path).remove(path)


def rmtree(path: str) -> None:
    """Delete a directory and everything under it; a missing directory is fine."""
    if not is_remote(path):
        shutil.rmtree(path, ignore_errors=not os.path.exists(path))
        return
    if exists(path):
        with _remote("rmtree", path):
            _gfile(path).rmtree(path)
