"""The Evaluator's decisions as plain functions: blessing (absolute thresholds and the baseline
gate) and the blessing of the variant export.serve names. A variant's fitness to serve is
decided by components/serving/variants.py (`recommend`), handed in as a Decision per variant."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Decision:
    blessed: bool
    reason: str


def regression_failure(candidate: dict, baseline: dict | None, eval_config) -> str | None:
    """The baseline gate (float model vs the baseline's float model), or None when it holds."""
    if baseline is None or candidate["loss"] <= baseline["loss"] + eval_config.max_loss_regression:
        return None
    return (f"loss {candidate['loss']:.4f} > baseline loss {baseline['loss']:.4f} "
            f"+ eval.max_loss_regression {eval_config.max_loss_regression:.4f}")


def decide_blessing(candidate: dict, baseline: dict | None, eval_config,
                    per_token: bool = True) -> Decision:
    """Blessed iff every absolute threshold holds AND the loss is not worse than the baseline's
    by more than eval.max_loss_regression. The reason names the threshold, value and baseline.
    per_token=False (a subword tokenizer): the nats/token gates are skipped, the bits-per-byte
    gates (eval.max_bits_per_byte, eval.max_bits_per_byte_regression) still apply."""
    failures = []
    bpb_max = getattr(eval_config, "max_bits_per_byte", 0.0)
    bpb_regression = getattr(eval_config, "max_bits_per_byte_regression", -1.0)
    bpb = candidate.get("bits_per_byte")
    if bpb is not None and bpb_max > 0 and bpb > bpb_max:
        failures.append(f"bits per byte {bpb:.4f} > eval.max_bits_per_byte {bpb_max:.4f}")
    if (bpb is not None and baseline is not None and bpb_regression >= 0
            and baseline.get("bits_per_byte") is not None
            and bpb > baseline["bits_per_byte"] + bpb_regression):
        failures.append(f"bits per byte {bpb:.4f} > baseline {baseline['bits_per_byte']:.4f} + "
                        f"eval.max_bits_per_byte_regression {bpb_regression:.4f}")
    if not per_token:
        if failures:
            return Decision(False, "not blessed: " + "; ".join(failures))
        versus = (f"baseline {baseline['bits_per_byte']:.4f} bits/byte"
                  if baseline is not None and baseline.get("bits_per_byte") is not None
                  else "no comparable baseline")
        return Decision(True, f"blessed: {bpb:.4f} bits/byte (nats/token gates apply to byte "
                              f"models only), {versus}")
    if candidate["loss"] > eval_config.max_loss:
        failures.append(f"loss {candidate['loss']:.4f} > eval.max_loss {eval_config.max_loss:.4f}")
    if candidate["accuracy"] < eval_config.min_accuracy:
        failures.append(f"accuracy {candidate['accuracy']:.4f} < eval.min_accuracy "
                        f"{eval_config.min_accuracy:.4f}")
    regression = regression_failure(candidate, baseline, eval_config)
    if regression:
        failures.append(regression)
    if failures:
        return Decision(False, "not blessed: " + "; ".join(failures))
    versus = (f"baseline loss {baseline['loss']:.4f} (+{eval_config.max_loss_regression:g} allowed)"
              if baseline is not None else "no blessed baseline yet")
    return Decision(True, f"blessed: loss {candidate['loss']:.4f} <= eval.max_loss "
                          f"{eval_config.max_loss:.4f}, accuracy {candidate['accuracy']:.4f} >= "
                          f"{eval_config.min_accuracy:.4f}, {versus}")


def decide_serving(serve: str, variant_metrics: dict, fitness: dict, baseline: dict | None,
                   eval_config, per_token: bool = True) -> Decision:
    """Blessing of the variant export.serve names: the thresholds and the baseline applied to its
    own metrics, and for a quantized variant its fitness against the float model."""
    if serve not in variant_metrics:
        return Decision(False, f"not blessed: export.serve variant {serve!r} was not exported "
                               f"(have {sorted(variant_metrics)})")
    if serve == "float":
        return decide_blessing(variant_metrics[serve], baseline, eval_config, per_token)
    # A quantized variant: the absolute thresholds apply to what is served; the baseline gate
    # compares like with like (this float model vs the baseline's float model: training quality),
    # and the quantization cost is bounded separately by the variant's fitness.
    decision = decide_blessing(variant_metrics[serve], None, eval_config, per_token)
    if baseline is not None:
        quality = decide_blessing(variant_metrics["float"], baseline, eval_config, per_token)
        if not quality.blessed:
            failures = [decision.reason[len("not blessed: "):]] if not decision.blessed else []
            decision = Decision(False, "not blessed: " + "; ".join(
                failures + ["float model " + quality.reason[len("not blessed: "):]]))
        elif decision.blessed:
            decision = Decision(True, f"{decision.reason}; float model vs baseline: "
                                      f"{quality.reason[len('blessed: '):]}")
    fit = fitness[serve]
    if not fit.blessed:
        failures = [decision.reason[len("not blessed: "):]] if not decision.blessed else []
        return Decision(False, "not blessed: " + "; ".join(failures + [f"{serve} variant {fit.reason}"]))
    return Decision(decision.blessed, f"{decision.reason} ({serve} variant served, {fit.reason})")
