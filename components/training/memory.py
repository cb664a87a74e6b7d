"""Device memory a training run needs, estimated before anything is allocated.

Per replica, in bytes (N parameters, b = micro-batch sequences, T = seq_len, C = d_model,
H = heads, L = layers, V = vocabulary, s = bytes of the compute dtype: 4 float32, 2 mixed):
  parameters       4 N                     (float32 variables under every policy)
  optimizer state  8 N                     (AdamW m and v)
  gradients        8 N                     (the accumulator and one micro-batch's gradients)
  activations      b T [L A + 12 V]   kept for the backward pass, A = bytes per token of a block:
                   gpt2:  A = C (12 + 15 s) + H T (9 + s): the float32 residual/LayerNorm tensors
                   (12 C), the compute-dtype qkv, attention output, MLP (4C) pre- and post-GELU
                   and casts (15 s C), the float32 scores and softmax plus a dropout mask and the
                   cast weights (H T (9 + s));
                   llama: A = 12 C + s (6 C + 3 K + 4 F) + 8 (C + K) + H T (9 + s), K = n_kv_head x
                   head dim, F = SwiGLU width: the same float32 stream/norm tensors, qkv (C + 2K),
                   rotated q and k (C + K), attention output, casts and fc_out (4 C), gate|up,
                   silu(gate) and their product (4 F) in the compute dtype, q and k in float32 for
                   the rotation (8 (C + K)), the same scores (every query head scores T keys);
                   logits and their softmax gradient in float32 (12 V).
                   remat=blocks keeps 4 C per block (its input) plus one block's full activations.
  evaluation       b_eval T [A + 8 V]   (forward only: one block live)
The activation terms are an upper estimate (XLA and TF free or fuse some of them); they exist to
fail in seconds with the setting to change, instead of out of memory after hours.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess

from components.model.shapes import kv_width, swiglu_hidden
from components.tokenizer.spec import token_spec

GIB = 2.0**30


@dataclasses.dataclass
class MemoryEstimate:
    parameters: float
    optimizer_state: float
    gradients: float
    activations_per_micro_batch: float
    evaluation_micro_batch: float
    device_memory: float          # bytes available per replica (0 = unknown)

    @property
    def training_total(self) -> float:
        return self.parameters + self.optimizer_state + self.gradients + self.activations_per_micro_batch

    def describe(self) -> str:
        device = f"{self.device_memory / GIB:.1f} GiB" if self.device_memory else "unknown"
        return (f"memory estimate per replica: parameters {self.parameters / GIB:.3f} GiB, optimizer "
                f"state {self.optimizer_state / GIB:.3f} GiB, gradients {self.gradients / GIB:.3f} "
                f"GiB, activations per micro-batch {self.activations_per_micro_batch / GIB:.3f} GiB "
                f"(training total {self.training_total / GIB:.2f} GiB), evaluation micro-batch "
                f"{self.evaluation_micro_batch / GIB:.3f} GiB; device memory {device}")


def device_memory_bytes(runtime, replicas: int) -> float:
    """Per-replica device memory: runtime.device_memory_gb if set, else the first GPU's total
    (nvidia-smi), else the machine's RAM shared by the CPU replicas; 0 if unknown."""
    if runtime.device_memory_gb:
        return runtime.device_memory_gb * GIB
    import tensorflow as tf
    if tf.config.list_physical_devices("GPU") and shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=20, check=True).stdout
            return min(float(line) for line in out.split()) * 2**20
        except (OSError, subprocess.SubprocessError, ValueError):
            return 0.0
    if tf.config.list_physical_devices("GPU"):
        return 0.0
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / max(replicas, 1)
    except (ValueError, OSError):
        return 0.0


def estimate(config, n_params: int, replicas: int, device_memory: float = 0.0, *,
             vocab_size: int | None = None) -> MemoryEstimate:
    """V is the real vocabulary: `vocab_size` when given (a loaded tokenizer's), else the
    config's (259 byte ids, or data.vocab_size for SentencePiece). T is data.seq_len."""
    m, t, T = config.model, config.train, config.data.seq_len
    s = 4 if config.runtime.precision == "float32" else 2
    V = vocab_size if vocab_size is not None else vocabulary(config)
    C, L = m.d_model, m.n_layer
    b = t.global_batch_size // (replicas * t.accumulation_steps)
    block = block_activation_bytes(m, T, s)                 # bytes per token, one block
    per_token = (4 * C * L + block) if t.remat == "blocks" else L * block
    activations = b * T * (per_token + 12 * V)
    evaluation = config.eval.batch_size * T * (block + 8 * V)
    whole = MemoryEstimate(parameters=4.0 * n_params, optimizer_state=8.0 * n_params,
                           gradients=8.0 * n_params, activations_per_micro_batch=float(activations),
                           evaluation_micro_batch=float(evaluation), device_memory=device_memory)
    return model_parallel_estimate(config, whole, replicas)      # sharded state / stages


def analytic_parameters(config) -> int:
    """The parameter count of config's model without building it (parameter_split's sum)."""
    embedding, block, final = parameter_split(config)
    return embedding + config.model.n_layer * block + final


def block_activation_bytes(m, T: int, s: int) -> int:
    """A: activation bytes per token of one block of model config m (see the module docstring)."""
    C, H = m.d_model, m.n_head
    scores = H * T * (9 + s)
    if m.arch == "gpt2":
        return C * (12 + 15 * s) + scores
    K, F = kv_width(m), swiglu_hidden(C, m.mlp_ratio, m.mlp_hidden)
    return 12 * C + s * (6 * C + 3 * K + 4 * F) + 8 * (C + K) + scores


def check(config, estimate_: MemoryEstimate, replicas: int) -> None:
    """Raise MemoryError naming the setting to change when the estimate exceeds device memory."""
    available = estimate_.device_memory
    if not available:
        return
    t = config.train
    b = t.global_batch_size // (replicas * t.accumulation_steps)
    if estimate_.training_total > available:
        raise MemoryError(
            f"training needs ~{estimate_.training_total / GIB:.1f} GiB per replica but the device has "
            f"{available / GIB:.1f} GiB ({estimate_.describe()}). Micro-batches of {b} sequences "
            f"(train.global_batch_size={t.global_batch_size} / ({replicas} replicas x "
            f"train.accumulation_steps={t.accumulation_steps})): raise train.accumulation_steps, "
            f"set train.remat=blocks (now {t.remat}), lower train.global_batch_size, or lower "
            f"data.seq_len (now {config.data.seq_len}: attention scores grow with its square) "
            f"(runtime.device_memory_gb overrides the detected size)")
    fixed = estimate_.parameters + estimate_.optimizer_state + estimate_.gradients
    if fixed + estimate_.evaluation_micro_batch > available:
        raise MemoryError(
            f"evaluation micro-batches of eval.batch_size={config.eval.batch_size} sequences need "
            f"~{estimate_.evaluation_micro_batch / GIB:.1f} GiB on top of {fixed / GIB:.1f} GiB of "
            f"weights and optimizer state; the device has {available / GIB:.1f} GiB: lower "
            f"eval.batch_size or data.seq_len (now {config.data.seq_len})")


# --- Per-device bytes under sharded optimizer state (ZeRO-1) and pipeline stages. ---

def vocabulary(config) -> int:
    """Token ids of the configured tokenizer (bytes: 259; SentencePiece: data.vocab_size)."""
    return token_spec(config.data).vocab_size


def parameter_split(config) -> tuple[int, int, int]:
    """(embedding parameters, parameters of one block, final norm + untied head): the analytic
    count of components/model/ (gpt2: qkv, proj, fc, fc_out with biases, two LayerNorms, a
    position table; llama: qkv (C + 2K wide), proj, fc [gate | up], fc_out without biases, two
    RMSNorm scales and the QK-norm ones, no position table)."""
    m, V = config.model, vocabulary(config)
    C = m.d_model
    if m.arch == "gpt2":
        hidden = m.mlp_ratio * m.d_model
        block = (C * 3 * C + 3 * C) + (C * C + C) + (C * hidden + hidden) + (hidden * C + C) + 4 * C
        final = 2 * C + (0 if m.tie_embeddings else V * C)
        return (V + config.data.seq_len) * C, block, final
    K, F, D = kv_width(m), swiglu_hidden(C, m.mlp_ratio, m.mlp_hidden), C // m.n_head
    block = C * (C + 2 * K) + C * C + C * 2 * F + F * C + 2 * C + (2 * D if m.qk_norm else 0)
    return V * C, block, C + (0 if m.tie_embeddings else V * C)


def stage_blocks(n_layer: int, stages: int) -> list[int]:
    """Blocks per pipeline stage, contiguous, the first stages one larger when S does not divide
    L (the one split rule: components/training/pipeline_stages.py uses it too)."""
    base, extra = divmod(n_layer, stages)
    return [base + (1 if s < extra else 0) for s in range(stages)]


def model_parallel_estimate(config, whole: MemoryEstimate, replicas: int) -> MemoryEstimate:
    """Per-device figures: with S pipeline stages the busiest stage's parameters, gradients and
    moments, and the activations of all M micro-batches of its blocks (GPipe keeps every
    micro-batch's until its backward; the last stage also keeps M logits); with sharded state
    the moments are 1/R per replica. Without either, `whole` unchanged."""
    stages, t = config.runtime.pipeline_stages, config.train
    result = whole
    if stages > 1:
        embedding, block, final = parameter_split(config)
        counts = stage_blocks(config.model.n_layer, stages)
        per_stage = [n * block + (embedding if s == 0 else 0) + (final if s == stages - 1 else 0)
                     for s, n in enumerate(counts)]
        busiest = max(per_stage)
        share = busiest / max(embedding + config.model.n_layer * block + final, 1)
        blocks_of_most = max(counts)
        m, T = config.model, config.data.seq_len
        s_bytes = 4 if config.runtime.precision == "float32" else 2
        b = t.global_batch_size // (replicas * t.accumulation_steps)
        one_block = block_activation_bytes(m, T, s_bytes)
        per_token = ((4 * m.d_model * blocks_of_most + one_block) if t.remat == "blocks"
                     else blocks_of_most * one_block) + 12 * vocabulary(config)
        block_activations = t.accumulation_steps * b * T * per_token
        result = dataclasses.replace(
            whole, parameters=whole.parameters * share, gradients=whole.gradients * share,
            optimizer_state=whole.optimizer_state * share,
            activations_per_micro_batch=float(block_activations))
    if t.shard_optimizer_state and replicas > 1:
        result = dataclasses.replace(result, optimizer_state=result.optimizer_state / replicas)
    return result


def fit_table(config, devices: int = 8, device_gb: float = 80.0) -> list[str]:
    """Which layouts of `config`'s model fit `devices` devices of `device_gb` GiB: per-device
    parameters, gradients, optimizer state, activations (GiB) and the verdict, one line each."""
    from components.config import merge
    n_params = analytic_parameters(config)
    layouts = [("mirrored", devices, {"runtime": {"strategy": "mirrored"}}),
               ("mirrored + shard_optimizer_state", devices,
                {"runtime": {"strategy": "mirrored"}, "train": {"shard_optimizer_state": True}})]
    layouts += [(f"{name}, remat=none", replicas, {**change, "train": {
        **change.get("train", {}), "remat": "none"}}) for name, replicas, change in layouts]
    layouts += [(f"pipeline_stages={s}", 1, {"runtime": {"strategy": "one_device",
                                                         "pipeline_stages": s}})
                for s in (2, 4, 8) if s <= min(devices, config.model.n_layer)]
    lines = [f"{n_params / 1e9:.2f}B parameters on {devices} devices of {device_gb:g} GiB "
             f"(GiB per device: params / grads / optimizer / activations = total)"]
    for name, replicas, change in layouts:
        variant = merge(config, change)
        e = estimate(variant, n_params, replicas, device_gb * GIB)
        verdict = "fits" if e.training_total <= device_gb * GIB else "does NOT fit"
        lines.append(f"{name:46s} {e.parameters / GIB:6.1f} / {e.gradients / GIB:6.1f} / "
                     f"{e.optimizer_state / GIB:6.1f} / {e.activations_per_micro_batch / GIB:7.1f} "
                     f"= {e.training_total / GIB:7.1f}  {verdict}")
    return lines
