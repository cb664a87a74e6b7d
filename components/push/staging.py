"""Push staging and claims, the one place that knows their names: folders and objects beside the
versions of <serving_dir>/<model>/ that TF Serving never loads (it only loads all-digit names).

  .incoming-<version>-<pid>/   a local push copies the model here, then renames it into place in
                               one step; a dead pusher's is removed by remove_dead_staging
  .retired-<version>-<pid>/    a version renamed out of TF Serving's sight before it is deleted
  .claims/<digest>.json        one pusher per model digest: a conditional create (O_EXCL
                               locally, If-None-Match on S3, ifGenerationMatch=0 on GCS)
  .claims/version-<n>          one model per version number, claimed the same way

A claim left by a dead pusher (its pid gone on this host, or older than CLAIM_STALE_S) is taken
over. The layout of the versions themselves is components/push/layout.py's.
"""

from __future__ import annotations

import json
import logging
import os
import time

from components.storage import fs
from components.common.process import process_alive, this_process
from components.push.layout import served_versions

CLAIMS_DIR = ".claims"
_STAGING_PREFIX, _RETIRED_PREFIX = ".incoming-", ".retired-"
CLAIM_STALE_S = float(os.environ.get("BIGTRAIN_PUSH_CLAIM_STALE_S", 3600))
LOGGER = logging.getLogger("bigtrain.push")


def staging_dir(base_dir: str, version: int) -> str:
    return fs.join(base_dir, f"{_STAGING_PREFIX}{version}-{os.getpid()}")


def retired_dir(base_dir: str, version: int) -> str:
    return fs.join(base_dir, f"{_RETIRED_PREFIX}{version}-{os.getpid()}")


def digest_claim(base_dir: str, digest: str) -> str:
    """The claim object of one model digest (its folder is created here)."""
    fs.makedirs(fs.join(base_dir, CLAIMS_DIR))
    return fs.join(base_dir, CLAIMS_DIR, f"{digest}.json")


def claim(path: str, what: dict) -> bool:
    """Conditionally create the claim object; False when someone else holds a live claim."""
    payload = json.dumps(dict(what, **this_process(), claimed_at=time.time())).encode()
    if fs.create_exclusive(path, payload):
        return True
    try:
        held = json.loads(fs.read_bytes(path))
    except FileNotFoundError:
        return fs.create_exclusive(path, payload)
    except ValueError:  # a claim cut short by a crash while it was written: stale
        held = {}
    if not claim_stale(held):
        return False
    LOGGER.warning("taking over the stale push claim %s (%s)", path, held)
    fs.remove(path)
    return fs.create_exclusive(path, payload)


def claim_stale(held: dict) -> bool:
    """A claim whose pusher is gone (on this host) or that is older than CLAIM_STALE_S."""
    if process_alive(held) is False:
        return True
    return time.time() - float(held.get("claimed_at", 0)) > CLAIM_STALE_S


def version_claim(base_dir: str, version: int) -> str:
    """The claim object of one version number (a failed push removes its own)."""
    return fs.join(base_dir, CLAIMS_DIR, f"version-{version}")


def claim_version(base_dir: str) -> int:
    """A version number no other push holds: at least now (seconds) and above every served one."""
    versions = served_versions(base_dir)
    version = max(int(time.time()), versions[-1] + 1 if versions else 0)
    while not fs.create_exclusive(version_claim(base_dir, version), str(os.getpid()).encode()):
        version += 1
    return version


def remove_dead_staging(serving_dir: str) -> list[str]:
    """The staging folders of dead pushers (this host) under every model of serving_dir: TF
    Serving never reads them, but they would pile up. Returns what was removed."""
    removed = []
    for model in fs.listdir(serving_dir):
        removed += remove_dead_staging_of(fs.join(serving_dir, model))
    return removed


def remove_dead_staging_of(base_dir: str) -> list[str]:
    """The staging folders of dead pushers (this host) of one model: every push starts here.
    Only a local push stages (an object store has no rename)."""
    removed = []
    if fs.is_remote(base_dir):
        return removed
    host = this_process()["host"]
    for name in fs.listdir(base_dir):
        pid = name.rsplit("-", 1)[-1]
        if (name.startswith(_STAGING_PREFIX) and pid.isdigit()
                and process_alive({"pid": pid, "host": host}) is False):
            LOGGER.info("removing the staging folder of a dead push: %s", fs.join(base_dir, name))
            fs.rmtree(fs.join(base_dir, name))
            removed.append(fs.join(base_dir, name))
    return removed
