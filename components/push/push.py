"""Atomic, idempotent push of a blessed SavedModel into a TF Serving layout:
<base>/<version>/{saved_model.pb, variables/, assets/, assets.extra/} with integer, increasing
versions.

Atomic: the model is copied into `<base>/.incoming-<version>-<pid>` (TF Serving only watches
all-digit names) and renamed to `<base>/<version>` in one step, so a reader sees either no version
or a complete one. Idempotent: each version carries `assets.extra/bigtrain_push.json` with the
content digest of the model; a model whose digest is already served is not pushed again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass

from components.push.deployment import publish_deployment_files

PUSH_RECORD = os.path.join("assets.extra", "bigtrain_push.json")
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
    for root, dirs, files in os.walk(saved_model_dir):
        dirs[:] = sorted(d for d in dirs if d != "assets.extra")
        for name in sorted(files):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, saved_model_dir).encode() + b"\0")
            with open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def served_versions(base_dir: str) -> list[int]:
    if not os.path.isdir(base_dir):
        return []
    return sorted(int(n) for n in os.listdir(base_dir)
                  if n.isdigit() and os.path.isdir(os.path.join(base_dir, n)))


def latest_version_dir(base_dir: str) -> str | None:
    versions = served_versions(base_dir)
    return os.path.join(base_dir, str(versions[-1])) if versions else None


def push_model(saved_model_dir: str, base_dir: str, record: dict | None = None,
               deploy: dict | None = None) -> PushResult:
    """Copy saved_model_dir to <base_dir>/<new version> atomically, unless already served; then
    the deployment files (deploy: keep_versions, policy; components/push/deployment.py)."""
    if not os.path.exists(os.path.join(saved_model_dir, "saved_model.pb")):
        raise FileNotFoundError(f"no saved_model.pb in {saved_model_dir}")
    digest = model_digest(saved_model_dir)
    os.makedirs(base_dir, exist_ok=True)
    for version in served_versions(base_dir):
        path = os.path.join(base_dir, str(version))
        try:
            with open(os.path.join(path, PUSH_RECORD), encoding="utf-8") as fh:
                served_digest = json.load(fh).get("model_digest")
        except (OSError, ValueError):
            continue
        if served_digest == digest:
            return PushResult(False, version, path, f"already served as version {version}")
    while True:
        versions = served_versions(base_dir)
        version = max(int(time.time()), versions[-1] + 1 if versions else 0)
        staging = os.path.join(base_dir, f".incoming-{version}-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(saved_model_dir, staging)
        os.makedirs(os.path.join(staging, "assets.extra"), exist_ok=True)
        with open(os.path.join(staging, PUSH_RECORD), "w", encoding="utf-8") as fh:
            json.dump(dict(record or {}, model_digest=digest, version=version,
                           pushed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())), fh, indent=2)
        final = os.path.join(base_dir, str(version))
        if os.environ.get("BIGTRAIN_TEST_PAUSE_BEFORE_PUBLISH_S"):  # fault-injection seam: kill -9 test
            time.sleep(float(os.environ["BIGTRAIN_TEST_PAUSE_BEFORE_PUBLISH_S"]))
        try:
            os.rename(staging, final)  # atomic; fails if another pusher took this version
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if os.path.exists(final):
                continue
            raise
        LOGGER.info("pushed %s -> %s", saved_model_dir, final)
        publish_deployment_files(base_dir, version, **(deploy or {}))
        return PushResult(True, version, final, f"pushed as version {version}")
