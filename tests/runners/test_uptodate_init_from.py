"""The up-to-date key holds a train.init_from=hf:DIR's files (names, sizes, modification times):
new weights written to the same directory make the next `bigtrain run` start the pipeline, with
the reason named. Fails on the key without them (an identical config and input: "up to date",
and the fine-tune would silently keep the old weights' model)."""

import os

from components import config as config_lib
from runners.local import uptodate


def hf_dir(tmp_path):
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    return folder


def test_new_weights_at_the_same_path_change_the_key(tmp_path):
    folder = hf_dir(tmp_path)
    config = config_lib.build_config("tiny", overrides=[f"train.init_from=hf:{folder}"])
    before = uptodate.inputs_key(config, "fingerprint")
    assert uptodate.changes(before, uptodate.inputs_key(config, "fingerprint")) == []
    (folder / "model.safetensors").write_bytes(b"\1" * 80)
    after = uptodate.inputs_key(config, "fingerprint")
    assert uptodate.changes(before, after) == [
        "train.init_from files changed (added, removed, resized or modified)"]


def test_a_rewrite_of_the_same_size_changes_the_key_by_its_mtime(tmp_path):
    folder = hf_dir(tmp_path)
    config = config_lib.build_config("tiny", overrides=[f"train.init_from=hf:{folder}"])
    before = uptodate.inputs_key(config, "fingerprint")
    weights = folder / "model.safetensors"
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert uptodate.changes(before, uptodate.inputs_key(config, "fingerprint"))


def test_other_warm_starts_add_nothing_to_the_key(tmp_path):
    config = config_lib.build_config("tiny")
    assert "init_from" not in uptodate.inputs_key(config, "fingerprint")
