"""What a figure read back from MLMD's sqlite store can be trusted to: each double to 6 decimals
(tests/support/mlmd.py). The e2e check `variant loss - float loss == variant loss delta` failed
at random at 1e-9 (issue: `abs((2.553328 - 2.553365) - -3.8e-05) < 1e-9`): its three figures
are rounded independently. Here the same three figures go through a real store."""

import os

from ml_metadata.proto import metadata_store_pb2 as pb

from tests.support.mlmd import MLMD_DECIMALS, agree_after_rounding, writable_store


def _through_mlmd(tmp_path, figures: dict) -> dict:
    store = writable_store(os.path.join(tmp_path, "metadata.sqlite"))
    artifact = pb.Artifact(type_id=store.put_artifact_type(pb.ArtifactType(name="Evaluation")))
    for name, value in figures.items():
        artifact.custom_properties[name].double_value = value
    [artifact_id] = store.put_artifacts([artifact])
    read = store.get_artifacts_by_id([artifact_id])[0].custom_properties
    return {name: read[name].double_value for name in figures}


def test_each_figure_comes_back_rounded_to_6_decimals(tmp_path):
    recorded = {"float_loss": 2.5533654, "int8_loss_delta": -3.76e-05, "tiny": 1.2e-9}
    read = _through_mlmd(str(tmp_path), recorded)
    assert read == {name: round(value, MLMD_DECIMALS) for name, value in recorded.items()}


def test_a_sum_of_rounded_figures_agrees_within_the_rounding_and_a_real_error_does_not(tmp_path):
    float_loss, delta = 2.5533654, -3.76e-05
    recorded = {"float_loss": float_loss, "delta": delta, "int8_loss": float_loss + delta,
                "wrong_int8_loss": float_loss + delta + 1e-5}   # a variant loss off by 1e-5
    read = _through_mlmd(str(tmp_path), recorded)
    difference = read["int8_loss"] - read["float_loss"]
    assert abs(difference - read["delta"]) > 1e-9              # the old check: a false failure
    assert agree_after_rounding(difference, read["delta"], roundings=3)
    assert not agree_after_rounding(read["wrong_int8_loss"] - read["float_loss"], read["delta"],
                                    roundings=3)
