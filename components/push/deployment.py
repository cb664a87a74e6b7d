"""Deployment files next to the pushed versions of one model (<serving_dir>/<model>/):

  models.config        TF Serving's --model_config_file (a ModelServerConfig text proto): the
                       model's name and base path, its version policy (`specific`: the labelled
                       versions; `latest`: the newest one) and the labels `stable` and `canary`
  batching_parameters  TF Serving's --batching_parameters_file (components/serving/batching.py)

Labels, moved by every push that publishes a new version: the new version becomes `canary`; the
version that was `canary` becomes `stable` (the first version is both). A rollback is an edit of
models.config (TF Serving re-reads it every --model_config_file_poll_wait_seconds).
Retention (push.keep_versions, default 5): the newest `keep_versions` versions and every
labelled version stay; older ones are renamed out of TF Serving's sight (it only watches all-digit
names; on an object store: their saved_model.pb is deleted first), then deleted. The config is
replaced (atomically on local disk, one PUT on S3) before any version is removed, so a label never
names a deleted version. All I/O goes through components.storage.fs (local, s3://, gs://).
"""

from __future__ import annotations

import logging

from components.storage import fs
from components.push.layout import (BATCHING_FILE, GRAPH_FILE, MODELS_CONFIG, read_labels,
                                    served_versions)
from components.push.staging import retired_dir
from components.serving.batching import BATCHING

DEFAULT_KEEP_VERSIONS = 5
POLICIES = ("specific", "latest")
LOGGER = logging.getLogger("bigtrain.push")


def moved_labels(previous: dict[str, int], new_version: int) -> dict[str, int]:
    """The new version is canary; the former canary (or, first time, the new version) is stable."""
    return {"stable": previous.get("canary", new_version), "canary": new_version}


def models_config_text(name: str, base_path: str, labels: dict[str, int], policy: str) -> str:
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2
    if policy not in POLICIES:
        raise ValueError(f"push version policy must be one of {POLICIES}, got {policy!r}")
    config = model_server_config_pb2.ModelServerConfig()
    model = config.model_config_list.config.add(name=name, base_path=base_path, model_platform="tensorflow")
    if policy == "latest":
        model.model_version_policy.latest.num_versions = 1
    else:  # labels only make sense for versions the policy keeps loaded
        model.model_version_policy.specific.versions.extend(sorted(set(labels.values())))
        for label, version in sorted(labels.items()):
            model.version_labels[label] = version
    return text_format.MessageToString(config)


def batching_parameters_text(batching: dict = BATCHING) -> str:
    # Written by hand: the BatchingParameters proto is not in the tensorflow-serving-api wheel.
    lines = [f"{key} {{ value: {batching[key]} }}"
             for key in ("max_batch_size", "batch_timeout_micros", "num_batch_threads", "max_enqueued_batches")]
    lines += [f"allowed_batch_sizes: {size}" for size in batching["allowed_batch_sizes"]]
    lines.append(f"pad_variable_length_inputs: {str(batching['pad_variable_length_inputs']).lower()}")
    return "\n".join(lines) + "\n"


def retire_version(base_dir: str, version: int) -> None:
    """Take one version out of TF Serving's sight, then delete it."""
    path = fs.join(base_dir, str(version))
    if fs.is_remote(base_dir):   # the graph first: TF Serving stops seeing the version
        fs.remove(fs.join(path, GRAPH_FILE))
    else:                        # out of TF Serving's sight in one step (a non-digit name)
        retired = retired_dir(base_dir, version)
        fs.rename(path, retired)
        path = retired
    fs.rmtree(path)


def retire_old_versions(base_dir: str, keep_versions: int, labels: dict[str, int]) -> list[int]:
    """Remove all but the newest keep_versions versions and the labelled ones; returns those removed."""
    if keep_versions < 1:
        raise ValueError(f"push.keep_versions must be >= 1, got {keep_versions}")
    versions = served_versions(base_dir)
    keep = set(versions[-keep_versions:]) | set(labels.values())
    removed = [v for v in versions if v not in keep]
    for version in removed:
        retire_version(base_dir, version)
        LOGGER.info("retired version %d of %s (push.keep_versions %d)", version, base_dir, keep_versions)
    return removed


def deployment_files(base_dir: str) -> dict[str, str | None]:
    """{file name: its text, None when absent}: what write_deployment_files replaces, so a push
    that fails after writing them can put them back."""
    return {name: fs.read_text(fs.join(base_dir, name)) if fs.exists(fs.join(base_dir, name))
            else None for name in (MODELS_CONFIG, BATCHING_FILE)}


def restore_deployment_files(base_dir: str, before: dict[str, str | None]) -> None:
    for name, text in before.items():
        if text is None:
            fs.remove(fs.join(base_dir, name))
        else:
            fs.write_text(fs.join(base_dir, name), text)


def write_deployment_files(base_dir: str, new_version: int | None, policy: str = "specific",
                           model_name: str | None = None) -> dict[str, int]:
    """Move the labels to new_version (None: the push published nothing, labels stay), write
    models.config and batching_parameters. Returns the labels."""
    base_dir = fs.absolute(base_dir)
    name = model_name or base_dir.rstrip("/").rsplit("/", 1)[-1]
    previous = read_labels(base_dir)
    labels = moved_labels(previous, new_version) if new_version is not None else previous
    versions = served_versions(base_dir)
    if not labels and versions:   # an older layout without a config: label the newest
        labels = moved_labels({}, versions[-1])
    fs.write_text(fs.join(base_dir, MODELS_CONFIG), models_config_text(name, base_dir, labels, policy))
    fs.write_text(fs.join(base_dir, BATCHING_FILE), batching_parameters_text())
    return labels
