"""The serving layout, the one place that knows it (push writes it; `bigtrain generate`, lineage
and the tests read it). Under <serving_dir>/<model>/ (TF Serving's base path):

  <version>/                 an all-digit folder: a version TF Serving loads once GRAPH_FILE is
                             in it (tensorflow/serving#1086), so it is written last
    saved_model.pb           GRAPH_FILE
    assets.extra/bigtrain_push.json
                             PUSH_RECORD: the model's content digest, its MLMD id and the run
                             that pushed it (push is idempotent on the digest)
    hf/                      HF_DIR: the Hugging Face layout of the same weights (push.formats:
                             [hf]; components/serving/hf), written before the version appears
  models.config              MODELS_CONFIG: TF Serving's --model_config_file, with the labels
                             `stable` and `canary` (components/push/deployment.py writes it)
  batching_parameters        BATCHING_FILE: TF Serving's --batching_parameters_file

Names TF Serving must never load (staging, claims, retired versions) are
components/push/staging.py's. Through components.storage.fs: local, s3:// or gs://.
"""

from __future__ import annotations

import json

from components.storage import fs
from components.serving.assets import extra_file

GRAPH_FILE = "saved_model.pb"
PUSH_RECORD = extra_file("bigtrain_push.json")
HF_DIR = "hf"
MODELS_CONFIG = "models.config"
BATCHING_FILE = "batching_parameters"


def model_base(serving_dir: str, model_name: str) -> str:
    """<serving_dir>/<model>: TF Serving's base path of one model."""
    return fs.join(serving_dir, model_name)


def version_dir(base_dir: str, version: int) -> str:
    return fs.join(base_dir, str(version))


def served_versions(base_dir: str) -> list[int]:
    """All-digit versions that hold saved_model.pb (what TF Serving would load)."""
    return sorted(int(n) for n in fs.listdir(base_dir)
                  if n.isdigit() and fs.exists(fs.join(base_dir, n, GRAPH_FILE)))


def read_push_record(version_path: str) -> dict:
    """The push record of a version folder; OSError or ValueError when unreadable."""
    return json.loads(fs.read_text(fs.join(version_path, PUSH_RECORD)))


def served_as(base_dir: str, digest: str) -> int | None:
    """The version that serves this content digest, if any."""
    for version in served_versions(base_dir):
        try:
            served = read_push_record(version_dir(base_dir, version))
        except (OSError, ValueError):
            continue
        if served.get("model_digest") == digest:
            return version
    return None


def read_labels(base_dir: str) -> dict[str, int]:
    """The version labels models.config holds now ({} when there is none)."""
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2
    path = fs.join(base_dir, MODELS_CONFIG)
    if not fs.exists(path):
        return {}
    config = text_format.Parse(fs.read_text(path), model_server_config_pb2.ModelServerConfig())
    return {label: int(version) for model in config.model_config_list.config
            for label, version in model.version_labels.items()}
