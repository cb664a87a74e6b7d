"""The numpy-only pieces of the PyTorch peer (benchmarks/peer/torch_llama.py), shared with the
driver (benchmarks/peer_torch.py, bigtrain's venv): bigtrain's learning-rate schedule
re-implemented, the strided windows of the whole-document scorer, the document files."""

from __future__ import annotations

import math

import numpy as np


def learning_rates(steps: int, t: dict) -> np.ndarray:
    """lr at steps 0 .. steps - 1 in float32 (components/training/optimizer.py learning_rate_at /
    wsd_learning_rate_at)."""
    step = np.arange(steps, dtype=np.float32)
    peak, floor, warmup, total = (np.float32(t["learning_rate"]), np.float32(t["min_learning_rate"]),
                                  t["warmup_steps"], t["train_steps"])
    warm = peak * (step + np.float32(1.0)) / np.float32(max(warmup, 1))
    if t["lr_schedule"] == "wsd":
        start = total - max(round(t["decay_fraction"] * total), 1)
        progress = np.clip((step - np.float32(start)) / np.float32(max(total - start - 1, 1)), 0, 1)
        later = floor + (peak - floor) * (np.float32(1.0) - np.sqrt(progress))
    else:
        progress = np.clip((step - np.float32(warmup)) / np.float32(max(total - warmup - 1, 1)), 0, 1)
        later = floor + (peak - floor) * np.float32(0.5) * (np.float32(1.0) + np.cos(
            np.float32(math.pi) * progress))
    return np.where(step < warmup, warm, later).astype(np.float32)


def strided_windows(length: int, context: int, stride_context: int) -> list[tuple[int, int, int]]:
    """components/evaluation/documents.py strided_windows, line for line (the peer imports
    nothing of bigtrain)."""
    stride = context - stride_context
    windows, scored_to = [], 1
    for begin in range(0, max(length - 1, 1), stride):
        end = min(begin + context + 1, length)
        windows.append((begin, scored_to, end))
        scored_to = end
        if end == length:
            break
    return windows


def load_documents(path: str) -> tuple[list[np.ndarray], np.ndarray]:
    """The driver's .npz of a document set: ids concatenated, offsets, UTF-8 bytes per document."""
    data = np.load(path)
    ids, offsets = data["ids"], data["offsets"]
    return [ids[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)], data["bytes"]
