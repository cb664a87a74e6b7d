"""Atomic, idempotent push of a blessed SavedModel into a TF Serving layout, on a local disk or an
object store (s3://, gs://): <base>/<version>/{saved_model.pb, variables/, assets/, assets.extra/}
with integer, increasing versions.

Never half-visible: TF Serving loads a version as soon as `saved_model.pb` appears in an all-digit
folder (tensorflow/serving#1086). Locally the model is copied into `<base>/.incoming-<version>-<pid>`
(not all digits: never read) and renamed into place in one step. On an object store a rename is a
copy plus a delete, not atomic, so everything else is written first and `saved_model.pb` last;
`served_versions` counts only versions that hold it.

Idempotent: each version carries `assets.extra/bigtrain_push.json` with the model's content digest;
a model whose digest is already served is not pushed again.

One version per model even when two pushes of it run at once: before copying, a pusher claims
`<base>/.claims/<digest>.json` with a conditional create (O_EXCL locally, `If-None-Match: *` on S3,
`ifGenerationMatch=0` on GCS), so exactly one of them publishes and the others wait (bounded) for
its version. Version numbers are claimed the same way (`.claims/version-<n>`), so two different
models pushed at once never share a number. A claim left by a dead pusher (its pid gone on this
host, or older than CLAIM_STALE_S) is taken over.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import time
from dataclasses import dataclass

from components.common import fs
from components.common.errors import BigtrainError
from components.push.deployment import publish_deployment_files

PUSH_RECORD = os.path.join("assets.extra", "bigtrain_push.json")
GRAPH_FILE = "saved_model.pb"
CLAIMS_DIR = ".claims"
CLAIM_STALE_S = float(os.environ.get("BIGTRAIN_PUSH_CLAIM_STALE_S", 3600))
WAIT_FOR_OTHER_PUSH_S = float(os.environ.get("BIGTRAIN_PUSH_WAIT_S", 1800))
LOGGER = logging.getLogger("bigtrain.push")


@dataclass(frozen=True)
class PushResult:
    pushed: bool
    version: int
    path: str
    reason: str


def model_digest(saved_model_dir: str) -> str:
    """sha256 over the graph and variables (not assets.extra, which holds run metadata)."""
    digest = hashlib.sha256()
    for relative in fs.walk_files(saved_model_dir):
        if relative.split("/", 1)[0] == "assets.extra":
            continue
        digest.update(relative.encode() + b"\0")
        with fs.open_file(fs.join(saved_model_dir, relative), "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def served_versions(base_dir: str) -> list[int]:
    """All-digit versions that hold saved_model.pb (what TF Serving would load)."""
    return sorted(int(n) for n in fs.listdir(base_dir)
                  if n.isdigit() and fs.exists(fs.join(base_dir, n, GRAPH_FILE)))


def latest_version_dir(base_dir: str) -> str | None:
    versions = served_versions(base_dir)
    return fs.join(base_dir, str(versions[-1])) if versions else None


def served_as(base_dir: str, digest: str) -> int | None:
    """The version that serves this content digest, if any."""
    for version in served_versions(base_dir):
        try:
            served = json.loads(fs.read_text(fs.join(base_dir, str(version), PUSH_RECORD)))
        except (OSError, ValueError):
            continue
        if served.get("model_digest") == digest:
            return version
    return None


def _claim(path: str, what: dict) -> bool:
    """Conditionally create the claim object; False when someone else holds a live claim."""
    payload = json.dumps(dict(what, pid=os.getpid(), host=socket.gethostname(),
                              claimed_at=time.time())).encode()
    if fs.create_exclusive(path, payload):
        return True
    try:
        held = json.loads(fs.read_bytes(path))
    except FileNotFoundError:
        return fs.create_exclusive(path, payload)
    except ValueError:  # a claim cut short by a crash while it was written: stale
        held = {}
    if not _claim_stale(held):
        return False
    LOGGER.warning("taking over the stale push claim %s (%s)", path, held)
    fs.remove(path)
    return fs.create_exclusive(path, payload)


def _claim_stale(held: dict) -> bool:
    # The pid probe is runners.lock.process_alive's, restated: components may not import runners.
    if held.get("host") == socket.gethostname() and str(held.get("pid", "")).isdigit():
        try:
            os.kill(int(held["pid"]), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
    return time.time() - float(held.get("claimed_at", 0)) > CLAIM_STALE_S


def _claim_version(base_dir: str) -> int:
    versions = served_versions(base_dir)
    version = max(int(time.time()), versions[-1] + 1 if versions else 0)
    while not fs.create_exclusive(fs.join(base_dir, CLAIMS_DIR, f"version-{version}"),
                                  str(os.getpid()).encode()):
        version += 1
    return version


def _wait_for_other_push(base_dir: str, digest: str, claim: str) -> PushResult | None:
    deadline = time.monotonic() + WAIT_FOR_OTHER_PUSH_S
    while time.monotonic() < deadline:
        version = served_as(base_dir, digest)
        if version is not None:
            return PushResult(False, version, fs.join(base_dir, str(version)),
                              f"pushed as version {version} by a concurrent push of this model")
        if not fs.exists(claim):  # the other pusher failed and let go: push it ourselves
            return None
        time.sleep(1.0)
    raise BigtrainError(f"another push of this model holds {claim} and has not published in "
                        f"{WAIT_FOR_OTHER_PUSH_S:.0f} s; if that push died, delete the claim")


def push_model(saved_model_dir: str, base_dir: str, record: dict | None = None,
               deploy: dict | None = None) -> PushResult:
    """Copy saved_model_dir to <base_dir>/<new version>, never half-visible, unless served; then
    the deployment files (deploy: keep_versions, policy; components/push/deployment.py)."""
    fs.prepare(saved_model_dir, base_dir)
    if not fs.exists(fs.join(saved_model_dir, GRAPH_FILE)):
        raise FileNotFoundError(f"no saved_model.pb in {saved_model_dir}")
    check_warmup_file(saved_model_dir)
    digest = model_digest(saved_model_dir)
    fs.makedirs(fs.join(base_dir, CLAIMS_DIR))
    claim = fs.join(base_dir, CLAIMS_DIR, f"{digest}.json")
    while True:
        version = served_as(base_dir, digest)
        if version is not None:
            return PushResult(False, version, fs.join(base_dir, str(version)),
                              f"already served as version {version}")
        if _claim(claim, {"model_digest": digest}):
            break
        waited = _wait_for_other_push(base_dir, digest, claim)
        if waited is not None:
            return waited
    try:
        version = _claim_version(base_dir)
        final = _publish(saved_model_dir, base_dir, version, dict(
            record or {}, model_digest=digest, version=version,
            pushed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
    except BaseException:
        fs.remove(claim)  # let a later (or waiting) push try again
        raise
    LOGGER.info("pushed %s -> %s", saved_model_dir, final)
    publish_deployment_files(base_dir, version, **(deploy or {}))
    return PushResult(True, version, final, f"pushed as version {version}")


def check_warmup_file(saved_model_dir: str) -> None:
    """TF Serving (--enable_model_warmup) refuses to load a version whose warm-up file is
    unreadable: read it back before publishing, so the push fails naming the file instead
    (WarmupFileError). A model without one loads without warm-up, as TF Serving does."""
    from components.serving import warmup   # TensorFlow: imported only when a push runs
    if fs.exists(fs.join(saved_model_dir, warmup.WARMUP_FILE)):
        warmup.read_warmup_requests(saved_model_dir)


def _pause_before_publish() -> None:
    if os.environ.get("BIGTRAIN_TEST_PAUSE_BEFORE_PUBLISH_S"):  # fault-injection seam: kill -9 test
        time.sleep(float(os.environ["BIGTRAIN_TEST_PAUSE_BEFORE_PUBLISH_S"]))


def _publish(saved_model_dir: str, base_dir: str, version: int, push_record: dict) -> str:
    final = fs.join(base_dir, str(version))
    record_bytes = json.dumps(push_record, indent=2).encode()
    if not fs.is_remote(base_dir):  # stage under a non-numeric name, rename in one step
        staging = fs.join(base_dir, f".incoming-{version}-{os.getpid()}")
        fs.rmtree(staging)
        fs.copytree(saved_model_dir, staging)
        fs.makedirs(fs.join(staging, "assets.extra"))
        fs.write_bytes(fs.join(staging, PUSH_RECORD), record_bytes)
        _pause_before_publish()
        try:
            fs.rename(staging, final)  # atomic; the version number is ours (claimed)
        except BaseException:
            fs.rmtree(staging)
            raise
        return final
    # Object store: no atomic rename. Everything but the graph first, the push record, then the
    # graph: TF Serving (and served_versions) see the version only once it is complete.
    try:
        fs.copytree(saved_model_dir, final, skip=(GRAPH_FILE,))
        fs.write_bytes(fs.join(final, PUSH_RECORD), record_bytes)
        _pause_before_publish()
        fs.copy(fs.join(saved_model_dir, GRAPH_FILE), fs.join(final, GRAPH_FILE))
    except BaseException:
        fs.rmtree(final)
        raise
    return final
