"""benchmarks/recipe_sweep.py reads the Evaluator's whole-document figures from its console lines
as the Evaluator writes them (components/evaluation/component.py, log_documents). Either side's
format changing fails here, where it would otherwise leave the sweep's table empty (issue 40,
item 5). The values are the default run's of 2026-11-27 (docs/benchmarks.md, "Main job")."""

import argparse
import logging

import pytest

from benchmarks import recipe_sweep
from components.evaluation.component import LOGGER, log_documents


def figures(model: float, zlib9: float, lzma9: float) -> dict:
    return {"document_bits_per_byte": model, "document_zlib9_bits_per_byte": zlib9,
            "document_lzma9_bits_per_byte": lzma9, "document_count": 20, "document_bytes": 129_544}


def test_the_sweep_reads_the_evaluators_own_lines(caplog):
    documents = {**figures(2.0862, 2.0065, 2.0157),
                 "sets": {"bigtrain_code": figures(2.8023, 2.7984, 2.8659)}}
    with caplog.at_level(logging.INFO, logger=LOGGER.name):
        log_documents(documents)
    assert recipe_sweep.parse_documents(caplog.text) == {
        "documents": {"set": "whole documents", "model": 2.0862, "zlib9": 2.0065, "lzma9": 2.0157},
        "held_out": {"set": "held-out bigtrain_code", "model": 2.8023, "zlib9": 2.7984,
                     "lzma9": 2.8659}}


def test_a_trial_starts_from_the_preset_it_names():
    """`preset=cpu` in a trial is `--preset cpu` on the command line, not a `--set`."""
    command = recipe_sweep.trial_command("/home", ("preset=cpu", "model.n_kv_head=2"), ["x.y=1"])
    assert command[2:6] == ["--home", "/home", "--preset", "cpu"]
    assert "preset=cpu" not in command
    assert command[-4:] == ["--set", "model.n_kv_head=2", "--set", "x.y=1"]


def test_only_runs_the_named_trials_in_the_order_given():
    """A short sweep runs the most wanted trials first (the driver's TRIALS has another order)."""
    parser = argparse.ArgumentParser()
    chosen = recipe_sweep.select_trials(["cosine", "default", "gqa-2"], parser)
    assert list(chosen) == ["cosine", "default", "gqa-2"]
    assert chosen["gqa-2"] == ("model.n_kv_head=2",)
    assert list(recipe_sweep.select_trials(None, parser)) == list(recipe_sweep.TRIALS)
    with pytest.raises(SystemExit):
        recipe_sweep.select_trials(["default", "no-such-trial"], parser)
