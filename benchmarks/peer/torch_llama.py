"""The PyTorch peer: a nanoGPT-style loop of bigtrain's llama block and optimizer, and bigtrain's
whole-document scorer, in plain PyTorch (issue 58, deliverable 4; benchmarks/peer_torch.py drives it).

Runs in the Hugging Face loader's venv (`make hf-loader`: PyTorch's CPU wheel, numpy); imports
neither TensorFlow nor Keras nor anything of bigtrain. What it equals in bigtrain:
- the model (components/model/gpt.py GPT, arch=llama; llama.py, layers.py): tied token
  embedding, pre-norm blocks x = x + proj(attn(rms(x))), x = x + fc_out(silu(gate) * up) with
  fc = [gate | up], RMSNorm in float32 (eps model.norm_eps), rotary in the rotate_half convention
  (theta model.rope_theta), grouped-query attention (query head h reads key/value head h // G),
  no biases, final RMSNorm, logits = x @ E^T. Init: N(0, 0.02) everywhere, N(0, 0.02 /
  sqrt(2 n_layer)) for proj and fc_out, norm scales 1. Weight layouts are bigtrain's kernels
  transposed (torch Linear stores (out, in)): `load_bigtrain` takes bigtrain's weights as saved
  by the driver and tests/model/test_peer_torch.py checks the logits against bigtrain's.
- the optimizer (components/training/optimizer.py make_optimizer): AdamW beta 0.9 / 0.95,
  eps 1e-8, decay train.weight_decay on every matrix and the embedding (train.decay_embeddings),
  none on the norm scales; the global gradient norm clipped to train.clip_norm. One difference
  of arithmetic: Keras adds eps to sqrt(v) before the bias correction, PyTorch after it (eps
  differs by sqrt(1 - 0.95^t) in the first steps; nothing at 1e-8 against these gradients).
- the schedule (components/training/optimizer.py make_schedule), re-implemented in numpy float32 below; the
  driver checks it against bigtrain's at every step of the run.
- the loss: mean cross-entropy over the non-pad targets of the batch.
- the scorer (components/evaluation/documents.py document_nats): the stream [BOS] ids [EOS],
  windows of context + 1 ids every context - stride_context ids, each target scored once;
  bits/byte = nats / ln 2 / the documents' UTF-8 bytes.
Batches: `batch` rows of the train split drawn uniformly with replacement by a numpy Generator
seeded with the run's seed (nanoGPT's get_batch over fixed-length rows).
"""

from __future__ import annotations

import json
import math
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.peer.plain import learning_rates, load_documents, strided_windows


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float):
        super().__init__()
        self.eps, self.scale = eps, nn.Parameter(torch.ones(width))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.scale


def rotary(steps: int, head_dim: int, theta: float):
    """(cos, sin), each (T, D) float32, halves repeated (layers.rotary_angles)."""
    inverse = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.arange(steps, dtype=torch.float32)[:, None] * inverse
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def apply_rotary(x, cos, sin):
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-second, first], dim=-1) * sin


class Block(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        d, self.heads, self.kv_heads = c["d_model"], c["n_head"], c["n_kv_head"]
        self.head_dim = d // self.heads
        self.ln1, self.ln2 = RMSNorm(d, c["norm_eps"]), RMSNorm(d, c["norm_eps"])
        self.qkv = nn.Linear(d, (self.heads + 2 * self.kv_heads) * self.head_dim, bias=False)
        self.proj = nn.Linear(self.heads * self.head_dim, d, bias=False)
        self.fc = nn.Linear(d, 2 * c["hidden"], bias=False)
        self.fc_out = nn.Linear(c["hidden"], d, bias=False)

    def attention(self, x, cos, sin):
        b, t, _ = x.shape
        heads = self.qkv(x).view(b, t, self.heads + 2 * self.kv_heads, self.head_dim).transpose(1, 2)
        q, k, v = heads.split([self.heads, self.kv_heads, self.kv_heads], dim=1)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if self.kv_heads != self.heads:                  # HF's repeat_kv: head h reads h // G
            groups = self.heads // self.kv_heads
            k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(b, t, -1))

    def forward(self, x, cos, sin):
        x = x + self.attention(self.ln1(x), cos, sin)
        gate, up = self.fc(self.ln2(x)).chunk(2, dim=-1)
        return x + self.fc_out(F.silu(gate) * up)


class Llama(nn.Module):
    """ids (B, T) int64 -> logits (B, T, V) float32; bigtrain's GPT with arch=llama, tied head."""

    def __init__(self, c: dict):
        super().__init__()
        self.config = c
        self.embedding = nn.Embedding(c["vocab_size"], c["d_model"])
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["n_layer"]))
        self.ln_f = RMSNorm(c["d_model"], c["norm_eps"])
        cos, sin = rotary(c["context"], c["d_model"] // c["n_head"], c["rope_theta"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        residual_std = 0.02 / math.sqrt(2 * c["n_layer"])
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, residual_std if name.endswith(("proj.weight", "fc_out.weight"))
                                else 0.02)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.embedding(ids)
        for block in self.blocks:
            x = block(x, self.cos[:t], self.sin[:t])
        return self.ln_f(x) @ self.embedding.weight.T

    def load_bigtrain(self, weights: dict) -> None:
        """bigtrain's variables by the driver's names (export_weights): kernels (in, out)."""
        with torch.no_grad():
            self.embedding.weight.copy_(torch.from_numpy(weights["token_embedding"]))
            self.ln_f.scale.copy_(torch.from_numpy(weights["ln_f"]))
            for i, block in enumerate(self.blocks):
                for name in ("ln1", "ln2"):
                    getattr(block, name).scale.copy_(torch.from_numpy(weights[f"block_{i}/{name}"]))
                for name in ("qkv", "proj", "fc", "fc_out"):
                    getattr(block, name).weight.copy_(torch.from_numpy(weights[f"block_{i}/{name}"]).T)

    def load_hf(self, weights_file: str) -> None:
        """The tensors of a LlamaForCausalLM export of bigtrain (components/serving/hf/mapping.py;
        the driver names the file): q/k/v and gate/up are our fused qkv and fc split by rows
        (torch layout), no permutation."""
        from safetensors.numpy import load_file
        w = {k: torch.from_numpy(v.astype(np.float32)) for k, v in load_file(weights_file).items()}
        with torch.no_grad():
            self.embedding.weight.copy_(w["model.embed_tokens.weight"])
            self.ln_f.scale.copy_(w["model.norm.weight"])
            for i, block in enumerate(self.blocks):
                p = f"model.layers.{i}."
                block.ln1.scale.copy_(w[p + "input_layernorm.weight"])
                block.ln2.scale.copy_(w[p + "post_attention_layernorm.weight"])
                block.qkv.weight.copy_(torch.cat([w[p + f"self_attn.{n}_proj.weight"]
                                                  for n in "qkv"]))
                block.proj.weight.copy_(w[p + "self_attn.o_proj.weight"])
                block.fc.weight.copy_(torch.cat([w[p + "mlp.gate_proj.weight"],
                                                 w[p + "mlp.up_proj.weight"]]))
                block.fc_out.weight.copy_(w[p + "mlp.down_proj.weight"])


def parameter_groups(model: Llama, weight_decay: float, decay_embeddings: bool) -> list[dict]:
    """bigtrain's gpt.decay_variables: matrices (and the embedding, if set) decayed; norms not."""
    decayed = [p for n, p in model.named_parameters()
               if p.dim() == 2 and (decay_embeddings or not n.startswith("embedding"))]
    kept = [p for p in model.parameters() if all(p is not q for q in decayed)]
    return [{"params": decayed, "weight_decay": weight_decay}, {"params": kept, "weight_decay": 0.0}]


def train(model: Llama, rows: np.ndarray, t: dict, *, seed: int, compiled: bool,
          warmup_steps: int, pad_id: int) -> dict:
    """t: bigtrain's train.* settings (the driver's JSON). rows: the train split, (N, T + 1).
    Returns the wall time, the steady-state tokens per second of wall and of this process's CPU
    time (steps after warmup_steps) and the mean loss of the last 10 steps."""
    generator = np.random.default_rng(seed)
    optimizer = torch.optim.AdamW(parameter_groups(model, t["weight_decay"], t["decay_embeddings"]),
                                  lr=t["learning_rate"], betas=(t["adam_beta1"], t["adam_beta2"]),
                                  eps=1e-8)
    lrs = learning_rates(t["train_steps"], t)
    forward = torch.compile(model) if compiled else model
    batch, tokens = t["global_batch_size"], t["global_batch_size"] * (rows.shape[1] - 1)
    losses, stamps = [], {}
    started = time.perf_counter()
    for step in range(t["train_steps"]):
        ids = torch.from_numpy(rows[generator.integers(0, len(rows), batch)].astype(np.int64))
        for group in optimizer.param_groups:
            group["lr"] = float(lrs[step])
        logits = forward(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                               ignore_index=pad_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), t["clip_norm"])
        optimizer.step()
        losses.append(loss.item())
        stamps[step + 1] = time.perf_counter(), time.process_time()
    wall = time.perf_counter() - started
    first, last = stamps[min(warmup_steps, t["train_steps"] - 1)], stamps[t["train_steps"]]
    done = (t["train_steps"] - min(warmup_steps, t["train_steps"] - 1)) * tokens
    return {"wall_s": wall, "tokens_per_s": done / (last[0] - first[0]),
            "tokens_per_cpu_s": done / (last[1] - first[1]),
            "final_loss": float(np.mean(losses[-10:])), "steps": t["train_steps"]}


@torch.no_grad()
def bits_per_byte(model: Llama, documents: list[np.ndarray], byte_counts: np.ndarray, *,
                  context: int, stride_context: int, batch_size: int, bos_id: int, eos_id: int,
                  pad_id: int) -> float:
    """documents.document_figures' document_bits_per_byte: nats of every scored target / ln 2 /
    the documents' bytes. stride_context already resolved (documents.stride_context_for)."""
    rows, targets, masks = [], [], []
    for ids in documents:
        stream = np.concatenate([[bos_id], ids, [eos_id]]).astype(np.int64)
        for begin, first, end in strided_windows(len(stream), context, stride_context):
            window = np.full(context + 1, pad_id, np.int64)
            window[:end - begin] = stream[begin:end]
            position = np.arange(begin + 1, begin + context + 1)
            rows.append(window[:-1])
            targets.append(window[1:])
            masks.append((position >= first) & (position < end))
    nats = 0.0
    model.eval()
    for start in range(0, len(rows), batch_size):
        part = slice(start, start + batch_size)
        logits = model(torch.from_numpy(np.stack(rows[part]))).float()
        losses = F.cross_entropy(logits.transpose(1, 2), torch.from_numpy(np.stack(targets[part])),
                                 reduction="none").double().numpy()
        nats += float(np.where(np.stack(masks[part]), losses, 0.0).sum())
    model.train()
    return nats / math.log(2) / float(byte_counts.sum())


def score_all(model: Llama, request: dict) -> dict:
    out = {}
    for name, path in request["document_sets"].items():
        documents, byte_counts = load_documents(path)
        out[name] = bits_per_byte(model, documents, byte_counts, context=request["model"]["context"],
                                  **request["scoring"])
    return out


def main(request_path: str) -> int:
    """One job of the driver: {"mode": "train" | "score", ...}; prints one JSON line."""
    with open(request_path, encoding="utf-8") as fh:
        request = json.load(fh)
    torch.set_num_threads(request.get("threads", 1))
    torch.manual_seed(request["seed"])
    model = Llama(request["model"])
    if request.get("weights"):
        model.load_bigtrain(dict(np.load(request["weights"])))
    if request.get("hf_weights"):
        model.load_hf(request["hf_weights"])
    result = {"threads": torch.get_num_threads(), "torch": torch.__version__,
              "parameters": sum(p.numel() for p in model.parameters())}
    if request["mode"] == "train":
        rows = np.load(request["train_rows"], mmap_mode="r")
        result.update(train(model, rows, request["train"], seed=request["seed"],
                            compiled=request["compiled"], warmup_steps=request["warmup_steps"],
                            pad_id=request["scoring"]["pad_id"]))
    if request.get("logits_of") is not None:
        ids = torch.from_numpy(np.asarray(request["logits_of"], np.int64))
        with torch.no_grad():
            np.save(request["logits_out"], model(ids).numpy())
    result["bits_per_byte"] = score_all(model, request)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
