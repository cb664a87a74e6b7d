"""The Evaluator's memoized measurements (components/evaluation/measure.py memoized_metrics): a
run that changes only a gate decides again from the same figures, without a second pass over
the eval split, the documents and the tasks; a run that changes what is measured measures again.
The reference is the two hand-made tables below (which setting each evaluation function reads),
not the product's GATES; on the old key (the whole eval section) every gate case fails."""

import dataclasses

import pytest

from components.config import EvalConfig
from components.config.heldout import HeldOutSetConfig
from components.evaluation.measure import memoized_metrics

# Read only to decide (components/evaluation/decision.py, held_out_sets.py's gates,
# components/serving/variants.py recommend), with a value other than the default.
DECIDE_ONLY = {"max_loss": 0.01, "min_accuracy": 0.5, "max_loss_regression": 1.0,
               "max_quantization_loss_delta": 0.5, "max_variant_size_ratio": 100.0,
               "max_variant_latency_ratio": 100.0, "max_bits_per_byte": 2.0,
               "max_bits_per_byte_regression": 0.1, "min_task_choice_accuracy": 0.3}
# Read by the measurements (measure.py, documents.py, held_out_sets.py, tasks.py).
MEASURED = {"batch_size": 8, "max_batches": 2, "variant_batches": 3, "document_bytes": 1000,
            "max_document_bytes": 100, "stride_context": 5, "sets": (), "task_items": 4,
            "task_set": "other", "task_seed": 1}


def counting_measure(tmp_path):
    """measure(eval config) through the memo, and the list of passes it computed."""
    passes = []

    def measure(eval_config):
        return memoized_metrics(str(tmp_path), "model/7", "examples/3", eval_config,
                                lambda: passes.append(1) or {"loss": 2.5})
    return measure, passes


def test_every_eval_setting_is_either_a_gate_or_a_measurement():
    """A new eval setting fails here until it is put in one table (and GATES if it decides)."""
    assert {f.name for f in dataclasses.fields(EvalConfig)} == set(DECIDE_ONLY) | set(MEASURED)


@pytest.mark.parametrize("name", sorted(DECIDE_ONLY))
def test_a_changed_gate_reuses_the_measurements(name, tmp_path):
    measure, passes = counting_measure(tmp_path)
    assert measure(EvalConfig()) == {"loss": 2.5}
    assert measure(dataclasses.replace(EvalConfig(), **{name: DECIDE_ONLY[name]})) == {"loss": 2.5}
    assert len(passes) == 1


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_a_changed_measurement_setting_measures_again(name, tmp_path):
    measure, passes = counting_measure(tmp_path)
    measure(EvalConfig())
    measure(dataclasses.replace(EvalConfig(), **{name: MEASURED[name]}))
    assert len(passes) == 2


def test_a_held_out_sets_gates_reuse_its_size_and_input_do_not(tmp_path):
    measure, passes = counting_measure(tmp_path)
    one_set = lambda **kw: EvalConfig(sets=(HeldOutSetConfig(name="code", input="/sets/a", **kw),))
    measure(one_set())
    measure(one_set(max_bits_per_byte=2.0, max_bits_per_byte_regression=0.1))
    assert len(passes) == 1
    measure(one_set(max_bytes=1000))
    measure(dataclasses.replace(one_set(), sets=(HeldOutSetConfig(name="code", input="/sets/b"),)))
    assert len(passes) == 3
