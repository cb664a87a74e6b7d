"""The Trainer's code digest (its cache key's code part) covers the code it runs, no more: an
edit to the model card, the Hugging Face writer or the UI does not re-run the Trainer; an edit to
the model does. Plain functions over a copy of the source tree (closure_digest's `root`), so the
edits never touch the checkout.

Fails on the digest before issue 39: TRAINING_CODE covered all of components.serving, so the
card's wording (components/serving/hf/card.py) was part of the Trainer's key. Since issue 60 the
digest is the import closure of run_fn (components/storage/digest.py import_closure), not a hand
list."""

from __future__ import annotations

import dataclasses
import os
import shutil

import pytest

from components import config as config_lib
from components.training import run_fn
from components.tuner.component import tuner_code_digest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def tree(tmp_path):
    """A copy of the source tree the digests are computed over."""
    for package in ("schemas", "components", "pipeline"):
        shutil.copytree(os.path.join(REPO, package), tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _edit(tree, path: str) -> None:
    with open(tree / path, "a", encoding="utf-8") as fh:
        fh.write("\n# an edit\n")


def _hf_warm_start(config):
    return dataclasses.replace(config, train=dataclasses.replace(config.train,
                                                                 init_from="hf:/models/parent"))


def test_the_copy_digests_like_the_checkout(tree):
    config = config_lib.build_config("tiny")
    assert run_fn.training_code_digest(config, root=str(tree)) == run_fn.training_code_digest(config)


@pytest.mark.parametrize("path", [
    "components/serving/hf/card.py",             # the model card's wording
    "components/serving/hf/tokenizer_files.py",  # the HF writer
    "components/serving/hf/directory.py",
    "pipeline/lineage/web/app.py",               # the UI
    "pipeline/lineage/report.py",
])
def test_editing_what_the_trainer_does_not_run_keeps_its_digest(tree, path):
    config = config_lib.build_config("tiny")
    before = run_fn.training_code_digest(config, root=str(tree))
    tuner_before = tuner_code_digest(root=str(tree))
    _edit(tree, path)
    assert run_fn.training_code_digest(config, root=str(tree)) == before
    assert tuner_code_digest(root=str(tree)) == tuner_before


@pytest.mark.parametrize("path", [
    "components/model/llama.py",
    "components/training/loop.py",
    "components/serving/variants.py",            # the variants the Trainer exports
    "components/serving/data_facts.py",          # the data facts it records in MODEL_INFO
    "components/metrics/lm.py",                  # the LM metrics it reports
])
def test_editing_the_code_the_trainer_runs_changes_its_digest(tree, path):
    config = config_lib.build_config("tiny")
    before = run_fn.training_code_digest(config, root=str(tree))
    _edit(tree, path)
    assert run_fn.training_code_digest(config, root=str(tree)) != before


def test_a_hugging_face_warm_start_keys_on_the_reader_it_runs(tree):
    """train.init_from=hf:DIR runs the HF reader (components/serving/hf directory and mapping):
    then its code is the Trainer's too."""
    config = _hf_warm_start(config_lib.build_config("tiny"))
    before = run_fn.training_code_digest(config, root=str(tree))
    _edit(tree, "components/serving/hf/mapping.py")
    assert run_fn.training_code_digest(config, root=str(tree)) != before
