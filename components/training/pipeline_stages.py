"""Pipeline model parallelism (GPipe) for `runtime.pipeline_stages=S`.

The block stack is split into S contiguous stages (memory.stage_blocks: the first stages one
block larger when S does not divide L); stage s's variables and computation live on device s,
the embeddings with stage 0 and the final LayerNorm and head with stage S-1. The M = accumulation
micro-batches stream through the stages:

  forward:  micro-batch i, stage s:  a[i, s] = stage_s(a[i, s-1])    on device s, own tape
            (stage S-1 ends in the micro-batch's loss: sum of token losses / global count N)
  backward: micro-batch i, stage s (s = S-1 .. 0):
            dW_s += d a[i, s] / dW_s,   d a[i, s-1] = tape[i, s].gradient(a[i, s], a[i, s-1], d a[i, s])

All M x S forward pieces are issued before the backward ones (GPipe); the TensorFlow executor
runs every piece whose inputs are ready, so stage s works on micro-batch i while stage s+1 works
on micro-batch i-1: the bubble is (S-1)/(M+S-1) of the step (benchmarks/train_throughput.py
measures it). Activations of all M micro-batches are kept until their backward (memory.py counts
them). The tied output head reads the embedding matrix on the last stage (a copy per step) and its
gradient is added to stage 0's.

The loss, the dropout seeds (dropout_seed(seed, step, 0, i)) and the loss scaling are those of
train_step.make_gradient_fn with one replica, so a pipelined step equals the one-device step up
to float rounding (tests/training/test_pipeline_stages.py). Variables are ordinary Keras
variables: checkpoints restore into any S, and into the unsplit model for export.

Supported with runtime.strategy=one_device only (config rules): the stages are the host's
devices, the strategy is the default one.
"""

from __future__ import annotations

import tensorflow as tf

from components.config import ConfigError
from components.model.gpt import GPT, model_arguments
from components.training.memory import stage_blocks
from components.training.strategy import ensure_cpu_replicas
from components.training.train_step import (dropout_seed, masked_token_loss_sum, target_count,
                                            unscale)


def stage_devices(stages: int) -> list[str]:
    """The S devices of the stages: GPUs when present, else S logical CPU devices."""
    devices = tf.config.list_logical_devices("GPU")
    if not devices:
        ensure_cpu_replicas(stages)
        devices = tf.config.list_logical_devices("CPU")
    if len(devices) < stages:
        raise ConfigError(f"runtime.pipeline_stages ({stages}) exceeds the {len(devices)} devices "
                          f"of this host ({[d.name for d in devices]})")
    return [d.name for d in devices[:stages]]


def stage_ranges(n_layer: int, stages: int) -> list[range]:
    """Block indices of each stage, contiguous and complete."""
    ranges, start = [], 0
    for count in stage_blocks(n_layer, stages):
        ranges.append(range(start, start + count))
        start += count
    return ranges


class StagedGPT(GPT):
    """A GPT whose stages sit on `devices` (set before the first call builds the variables)."""

    def build_on_devices(self, devices: list[str]) -> None:
        """Create every variable on its stage's device, in the order GPT.call creates them (so
        the same seed gives the same initial weights as the unsplit model)."""
        self.stage_devices = list(devices)
        self.stage_ranges = stage_ranges(len(self.blocks), len(devices))
        x = tf.zeros([1, self.context_length], tf.int32)
        for stage in range(len(devices)):
            x = self.run_stage(stage, x, training=False, seed=None)
        self.built = True

    def run_stage(self, stage: int, x, training: bool, seed):
        """Stage `stage` on its device: ids -> stream (first), stream -> stream, -> logits (last)."""
        with tf.device(self.stage_devices[stage]):
            if stage == 0:
                x = self.embed(x, training, seed)
            for index in self.stage_ranges[stage]:
                x = self.apply_block(index, x, training, seed)
            if stage == len(self.stage_devices) - 1:
                x = self.project(x)
            return x

    def stage_variables(self) -> list[list]:
        """Trainable variables each stage's backward differentiates (the tied embedding on the
        first and the last stage), in model.trainable_variables order."""
        def owned(layer):
            return {id(v) for v in layer.trainable_variables}
        first = owned(self.token_embedding) | (owned(self.position_embedding)
                                                if self.position_embedding is not None else set())
        last = owned(self.ln_f) | (owned(self.head) if self.head is not None else
                                   owned(self.token_embedding))
        stages = []
        for stage, blocks in enumerate(self.stage_ranges):
            ids = set().union(*[owned(self.blocks[i]) for i in blocks])
            ids |= first if stage == 0 else set()
            ids |= last if stage == len(self.stage_ranges) - 1 else set()
            stages.append([v for v in self.trainable_variables if id(v) in ids])
        return stages


def build_staged_model(model_config, context_length: int, precision: str, remat: str,
                       vocab_size: int, stages: int) -> StagedGPT:
    model = StagedGPT(context_length=context_length, dtype=precision, remat=remat,
                      vocab_size=vocab_size, **model_arguments(model_config))
    model.build_on_devices(stage_devices(stages))
    return model


def make_pipeline_gradient_fn(model: StagedGPT, state, *, global_batch_size: int,
                              accumulation_steps: int, dynamic_loss_scale: bool, seed: int = 0,
                              pad_id: int):
    """Same contract as train_step.make_gradient_fn (one replica): (inputs, targets) ->
    (loss, unscaled gradients of model.trainable_variables, loss)."""
    micro, size = accumulation_steps, global_batch_size // accumulation_steps
    variables, per_stage = model.trainable_variables, model.stage_variables()
    index_of = {id(v): i for i, v in enumerate(variables)}
    last = len(model.stage_devices) - 1

    def forward(inputs, targets, count, scale, step):
        """All M x S forward pieces; returns the tapes, stage inputs/outputs and the loss."""
        pieces, loss = {}, tf.constant(0.0)
        for i in range(micro):
            x = inputs[i * size:(i + 1) * size]
            micro_seed = model.dropout_seed(True, dropout_seed(seed, step, 0, i))
            for stage in range(last + 1):
                with tf.GradientTape() as tape:
                    if stage:
                        tape.watch(x)
                    out = model.run_stage(stage, x, training=True, seed=micro_seed)
                    if stage == last:
                        with tf.device(model.stage_devices[last]):
                            micro_loss = masked_token_loss_sum(
                                targets[i * size:(i + 1) * size], out, pad_id) / count
                            out = micro_loss * scale
                            loss += micro_loss
                pieces[i, stage] = (tape, x, out)
                x = out
        return pieces, loss

    def backward(pieces):
        grads = [None] * len(variables)
        for i in range(micro):
            upstream = None
            for stage in range(last, -1, -1):
                tape, x, out = pieces[i, stage]
                with tf.device(model.stage_devices[stage]):
                    sources = per_stage[stage] + ([x] if stage else [])
                    result = tape.gradient(out, sources, output_gradients=upstream)
                    for variable, g in zip(per_stage[stage], result):
                        k = index_of[id(variable)]
                        g = tf.cast(tf.convert_to_tensor(g), variable.dtype)
                        grads[k] = g if grads[k] is None else grads[k] + g
                    upstream = result[-1] if stage else None
        return grads

    def replica_gradients(inputs, targets):
        count = target_count(targets, pad_id)
        scale = state.loss_scale.read_value() if dynamic_loss_scale else tf.constant(1.0)
        pieces, loss = forward(inputs, targets, count, scale, state.step.read_value())
        return loss, unscale(backward(pieces), scale), loss

    return replica_gradients
