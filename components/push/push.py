"""Atomic, idempotent push of a blessed SavedModel into a TF Serving layout, on a local disk or an
object store (s3://, gs://), with integer, increasing versions (the layout: components/push/
layout.py; staging folders and claims: components/push/staging.py).

Never half-visible: TF Serving loads a version as soon as its graph file appears in an all-digit
folder (tensorflow/serving#1086). Locally the model is copied into a staging folder (not all
digits: never read) and renamed into place in one step. On an object store a rename is a copy
plus a delete, not atomic, so everything else is written first and the graph last;
`served_versions` counts only versions that hold it.

Idempotent: each version carries a push record with the model's content digest; a model whose
digest is already served is not pushed again.

One version per model even when two pushes of it run at once: before copying, a pusher claims
the model's digest with a conditional create, so exactly one of them publishes and the others
wait (bounded) for its version. Version numbers are claimed the same way, so two different
models pushed at once never share a number.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass

from components.storage import fs
from components.common.errors import BigtrainError, DiskFullError
from components.common.faults import pause_if_set
from components.push import staging
from components.push import deployment
from components.serving.assets import is_extra
from components.push.layout import GRAPH_FILE, HF_DIR, PUSH_RECORD, served_as, version_dir

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
        if is_extra(relative):
            continue
        digest.update(relative.encode() + b"\0")
        with fs.open_file(fs.join(saved_model_dir, relative), "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _wait_for_other_push(base_dir: str, digest: str, claim: str) -> PushResult | None:
    deadline = time.monotonic() + WAIT_FOR_OTHER_PUSH_S
    while time.monotonic() < deadline:
        version = served_as(base_dir, digest)
        if version is not None:
            return PushResult(False, version, version_dir(base_dir, version),
                              f"pushed as version {version} by a concurrent push of this model")
        if not fs.exists(claim):  # the other pusher failed and let go: push it ourselves
            return None
        time.sleep(1.0)
    raise BigtrainError(f"another push of this model holds {claim} and has not published in "
                        f"{WAIT_FOR_OTHER_PUSH_S:.0f} s; if that push died, delete the claim")


def push_model(saved_model_dir: str, base_dir: str, record: dict | None = None,
               deploy: dict | None = None, extras: dict | None = None) -> PushResult:
    """Copy saved_model_dir to <base_dir>/<new version>, never half-visible, unless served; then
    the deployment files (deploy: keep_versions, policy; components/push/deployment.py).
    extras: {folder: write(folder path, version)}, more formats written inside the version
    before it becomes visible (hf_writer). A full disk anywhere in it is DiskFullError naming
    base_dir, with nothing of the push left there."""
    fs.prepare(saved_model_dir, base_dir)
    if not fs.exists(fs.join(saved_model_dir, GRAPH_FILE)):
        raise FileNotFoundError(f"no {GRAPH_FILE} in {saved_model_dir}")
    check_warmup_file(saved_model_dir)
    digest = model_digest(saved_model_dir)
    try:
        return _claim_and_publish(saved_model_dir, base_dir, digest, record, deploy or {},
                                  extras or {})
    except OSError as err:
        if err.errno != errno.ENOSPC:
            raise
        raise DiskFullError(
            # not err.filename: shutil's copy names its source there, on another disk
            f"no space left on device while pushing {saved_model_dir} into {base_dir} "
            f"({err.strerror}); nothing of the push is left there (staging folder, version, "
            f"deployment files and claims removed or put back), earlier versions are intact. "
            f"Free space under {base_dir} and push again") from err


def _claim_and_publish(saved_model_dir: str, base_dir: str, digest: str, record: dict | None,
                       deploy: dict, extras: dict) -> PushResult:
    claim = staging.digest_claim(base_dir, digest)
    while True:
        version = served_as(base_dir, digest)
        if version is not None:
            return PushResult(False, version, version_dir(base_dir, version),
                              f"already served as version {version}")
        if staging.claim(claim, {"model_digest": digest}):
            break
        waited = _wait_for_other_push(base_dir, digest, claim)
        if waited is not None:
            return waited
    version = final = None
    try:
        staging.remove_dead_staging_of(base_dir)
        before = deployment.deployment_files(base_dir)
        version = staging.claim_version(base_dir)
        final = _publish(saved_model_dir, base_dir, version, dict(
            record or {}, model_digest=digest, version=version,
            pushed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())), extras)
        labels = deployment.write_deployment_files(base_dir, version, deploy.get("policy", "specific"),
                                                   deploy.get("model_name"))
    except BaseException:
        # Let a later (or waiting) push try again, under the same version number if it likes.
        if final is not None:   # published, but its deployment files failed: take it back
            _withdraw(base_dir, version, before)
        fs.remove(claim)
        if version is not None:
            fs.remove(staging.version_claim(base_dir, version))
        raise
    LOGGER.info("pushed %s -> %s", saved_model_dir, final)
    deployment.retire_old_versions(fs.absolute(base_dir), deploy.get(
        "keep_versions", deployment.DEFAULT_KEEP_VERSIONS), labels if deploy.get(
        "policy", "specific") == "specific" else {})
    return PushResult(True, version, final, f"pushed as version {version}")


def _withdraw(base_dir: str, version: int, before: dict) -> None:
    """Undo a published version whose deployment files could not be written: the version out of
    sight and deleted (freeing the space), then models.config and batching_parameters as they
    were. Best effort: the error that got here is the one reported."""
    try:
        deployment.retire_version(base_dir, version)
        deployment.restore_deployment_files(base_dir, before)
    except Exception:
        LOGGER.exception("could not fully withdraw version %d of %s", version, base_dir)


def check_warmup_file(saved_model_dir: str) -> None:
    """TF Serving (--enable_model_warmup) refuses to load a version whose warm-up file is
    unreadable: read it back before publishing, so the push fails naming the file instead
    (WarmupFileError). A model without one loads without warm-up, as TF Serving does."""
    from components.serving import warmup   # TensorFlow: imported only when a push runs
    if fs.exists(fs.join(saved_model_dir, warmup.WARMUP_FILE)):
        warmup.read_warmup_requests(saved_model_dir)


# Fault-injection seam (tests/e2e/test_bad_input.py, kill -9): set, the push holds still for that
# many seconds before it publishes (staged, not yet served).
PAUSE_BEFORE_PUBLISH = "BIGTRAIN_TEST_PAUSE_BEFORE_PUBLISH_S"


def hf_writer(model_dir: str, facts: dict | None = None):
    """The extras writer of push.formats `hf`: the Model artifact at model_dir in the Hugging
    Face layout (float32), its card with the pushed version."""
    def write(folder: str, version: int) -> None:
        from components.serving.hf.card import facts_from_model_info
        from components.serving.hf.directory import write_hf_directory
        from components.serving.hf.source import load_exported
        model, tokenizer, info = load_exported(model_dir)
        card = dict(facts_from_model_info(info), **(facts or {}), pushed_version=version,
                    source=model_dir)
        write_hf_directory(model, tokenizer, folder, facts=card)
    return write


def deploy_settings(push) -> dict:
    """push_model's deploy argument from the typed push section (components/config PushConfig)."""
    return {"keep_versions": push.keep_versions, "policy": push.version_policy}


def format_writers(formats, model_dir: str, facts: dict | None = None) -> dict:
    """{folder in the version: writer} for push.formats."""
    return {HF_DIR: hf_writer(model_dir, facts)} if "hf" in formats else {}


def _publish(saved_model_dir: str, base_dir: str, version: int, push_record: dict,
             extras: dict) -> str:
    final = version_dir(base_dir, version)
    record_bytes = json.dumps(push_record, indent=2).encode()
    if not fs.is_remote(base_dir):  # stage under a non-numeric name, rename in one step
        incoming = staging.staging_dir(base_dir, version)
        try:  # the copy too: a full disk mid-copy must not leave a half-copied staging folder
            fs.rmtree(incoming)
            fs.copytree(saved_model_dir, incoming)
            fs.makedirs(os.path.dirname(fs.join(incoming, PUSH_RECORD)))
            fs.write_bytes(fs.join(incoming, PUSH_RECORD), record_bytes)
            for folder, write in extras.items():
                write(fs.join(incoming, folder), version)
            pause_if_set(PAUSE_BEFORE_PUBLISH)
            fs.rename(incoming, final)  # atomic; the version number is ours (claimed)
        except BaseException:
            fs.rmtree(incoming)
            raise
        return final
    # Object store: no atomic rename. Everything but the graph first, the push record, then the
    # graph: TF Serving (and served_versions) see the version only once it is complete.
    try:
        fs.copytree(saved_model_dir, final, skip=(GRAPH_FILE,))
        for folder, write in extras.items():
            write(fs.join(final, folder), version)
        fs.write_bytes(fs.join(final, PUSH_RECORD), record_bytes)
        pause_if_set(PAUSE_BEFORE_PUBLISH)
        fs.copy(fs.join(saved_model_dir, GRAPH_FILE), fs.join(final, GRAPH_FILE))
    except BaseException:
        fs.rmtree(final)
        raise
    return final
