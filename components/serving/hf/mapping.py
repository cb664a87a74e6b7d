"""Our GPT <-> a transformers class: config.json and the tensors, both directions.

Classes: model.arch=gpt2 -> GPT2LMHeadModel; llama -> LlamaForCausalLM, or Qwen3ForCausalLM when
model.qk_norm is on (Llama has no QK-norm; Qwen3 has one RMSNorm scale of width D for all query
heads and one for all key heads, applied before the rotation, as ours). Exact correspondences:
  - rotary: ours is the half-split ("rotate_half") convention, HF Llama's and Qwen3's, so
    q_proj/k_proj are our qkv kernel's q and k columns transposed, with no permutation (a
    Meta-style interleaved checkpoint would need one: components/model/layers.py says why);
  - GQA: num_key_value_heads = model.n_kv_head (0 = n_head); query head h reads kv head h // G;
  - tied embeddings: tie_word_embeddings = model.tie_embeddings (untied: lm_head.weight);
  - norms: rms_norm_eps = model.norm_eps; GPT-2's LayerNorm eps is 1e-5 on both sides;
  - GPT-2's MLP is exact (erf) GELU: activation_function "gelu", not GPT-2's "gelu_new";
  - dropout: model.dropout on embeddings, attention weights and outputs (training only).
Keras Dense kernels are (in, out); torch Linear weights (out, in): transposed. GPT-2's Conv1D
weights are (in, out): as they are. Our fused kernels split by columns: qkv = [q | k | v] heads
in order, llama fc = [gate | up].
"""

from __future__ import annotations

import numpy as np

from components.serving.hf import CONFIG_FILE, HFShapeMismatch, UnsupportedHFClass

ARCH_CLASSES = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "qwen3": "Qwen3ForCausalLM"}
MODEL_TYPES = {"GPT2LMHeadModel": "gpt2", "LlamaForCausalLM": "llama", "Qwen3ForCausalLM": "qwen3"}
GPT2_LAYER_NORM_EPS = 1e-5   # gpt.Block's and ln_f's LayerNorm epsilon


def hf_class(model) -> str:
    if model.arch == "gpt2":
        return ARCH_CLASSES["gpt2"]
    return ARCH_CLASSES["qwen3" if model.blocks[0].attn.q_norm is not None else "llama"]


def hf_config(model, specials: dict, dtype: str = "float32") -> dict:
    """config.json of a built GPT; specials: pad_id, bos_id, eos_id of its tokenizer."""
    cls = hf_class(model)
    block, width = model.blocks[0], model.token_embedding.output_dim
    common = {"architectures": [cls], "model_type": MODEL_TYPES[cls],
              "vocab_size": int(model.vocab_size), "tie_word_embeddings": model.head is None,
              "bos_token_id": int(specials["bos_id"]), "eos_token_id": int(specials["eos_id"]),
              "pad_token_id": int(specials["pad_id"]), "torch_dtype": dtype,
              "initializer_range": 0.02, "use_cache": True}
    if model.arch == "gpt2":
        return dict(common, n_layer=len(model.blocks), n_head=block.attn.n_head, n_embd=width,
                    n_inner=int(block.fc.units), n_positions=model.context_length,
                    n_ctx=model.context_length, activation_function="gelu",
                    layer_norm_epsilon=GPT2_LAYER_NORM_EPS, resid_pdrop=model.rate,
                    embd_pdrop=model.rate, attn_pdrop=model.rate, scale_attn_weights=True)
    attn = block.attn
    out = dict(common, hidden_size=width, num_hidden_layers=len(model.blocks),
               num_attention_heads=attn.n_head, num_key_value_heads=attn.n_kv_head,
               head_dim=attn.head_dim, intermediate_size=int(block.hidden), hidden_act="silu",
               max_position_embeddings=model.context_length, rms_norm_eps=float(model.ln_f.epsilon),
               rope_theta=float(attn.rope_theta), rope_scaling=None, attention_bias=False,
               attention_dropout=model.rate)
    if cls == ARCH_CLASSES["qwen3"]:
        out.update(use_sliding_window=False, sliding_window=None, max_window_layers=len(model.blocks))
    else:
        out.update(mlp_bias=False, pretraining_tp=1)
    return out


def _require(config: dict, key: str, expected, source: str) -> None:
    value = config.get(key, expected)
    if value != expected:
        raise UnsupportedHFClass(f"{source}/{CONFIG_FILE}: {key}={value!r} has no bigtrain "
                                 f"equivalent (supported: {expected!r})")


def model_settings(config: dict, source: str) -> dict:
    """The model.* settings (and vocab_size, context_length) an HF config.json stands for;
    UnsupportedHFClass for another class or a setting we do not have."""
    classes = config.get("architectures") or []
    cls = classes[0] if len(classes) == 1 else None
    if cls not in MODEL_TYPES:
        raise UnsupportedHFClass(f"{source}/{CONFIG_FILE}: architectures={classes!r}; bigtrain "
                                 f"reads one of {sorted(MODEL_TYPES)}")
    if cls == ARCH_CLASSES["gpt2"]:
        _require(config, "activation_function", "gelu", source)
        _require(config, "layer_norm_epsilon", GPT2_LAYER_NORM_EPS, source)
        width, inner = config["n_embd"], config.get("n_inner") or 4 * config["n_embd"]
        if inner % width:
            raise UnsupportedHFClass(f"{source}/{CONFIG_FILE}: n_inner={inner} is not a multiple "
                                     f"of n_embd={width} (model.mlp_ratio is an integer)")
        return dict(arch="gpt2", n_layer=config["n_layer"], n_head=config["n_head"], d_model=width,
                    mlp_ratio=inner // width, tie_embeddings=config.get("tie_word_embeddings", True),
                    vocab_size=config["vocab_size"], context_length=config["n_positions"])
    for key, supported in (("hidden_act", "silu"), ("rope_scaling", None),
                           ("attention_bias", False), ("mlp_bias", False),
                           ("use_sliding_window", False)):
        _require(config, key, supported, source)
    width, heads = config["hidden_size"], config["num_attention_heads"]
    _require(config, "head_dim", width // heads, source)
    return dict(arch="llama", n_layer=config["num_hidden_layers"], n_head=heads, d_model=width,
                n_kv_head=config.get("num_key_value_heads") or heads,
                mlp_hidden=config["intermediate_size"], rope_theta=float(config.get("rope_theta", 10000.0)),
                norm_eps=float(config.get("rms_norm_eps", 1e-6)), qk_norm=cls == ARCH_CLASSES["qwen3"],
                tie_embeddings=config.get("tie_word_embeddings", False),
                vocab_size=config["vocab_size"], context_length=config["max_position_embeddings"])


def _entries(model) -> list[tuple]:
    """(variable, [(HF tensor name, columns)], transposed) for every variable of the model, in
    column order of the variable's last axis; transposed: torch Linear layout."""
    if model.arch == "gpt2":
        return _gpt2_entries(model)
    return _llama_entries(model)


def _gpt2_entries(model) -> list[tuple]:
    def one(variable, name, transposed=False):
        return variable, [(name, variable.shape[-1])], transposed
    out = [one(model.token_embedding.embeddings, "transformer.wte.weight"),
           one(model.position_embedding.embeddings, "transformer.wpe.weight")]
    for i, b in enumerate(model.blocks):
        h = f"transformer.h.{i}."
        out += [one(b.ln1.gamma, h + "ln_1.weight"), one(b.ln1.beta, h + "ln_1.bias"),
                one(b.attn.qkv.kernel, h + "attn.c_attn.weight"), one(b.attn.qkv.bias, h + "attn.c_attn.bias"),
                one(b.attn.proj.kernel, h + "attn.c_proj.weight"), one(b.attn.proj.bias, h + "attn.c_proj.bias"),
                one(b.ln2.gamma, h + "ln_2.weight"), one(b.ln2.beta, h + "ln_2.bias"),
                one(b.fc.kernel, h + "mlp.c_fc.weight"), one(b.fc.bias, h + "mlp.c_fc.bias"),
                one(b.fc_out.kernel, h + "mlp.c_proj.weight"), one(b.fc_out.bias, h + "mlp.c_proj.bias")]
    out += [one(model.ln_f.gamma, "transformer.ln_f.weight"), one(model.ln_f.beta, "transformer.ln_f.bias")]
    if model.head is not None:
        out.append(one(model.head.kernel, "lm_head.weight", transposed=True))
    return out


def _llama_entries(model) -> list[tuple]:
    out = [(model.token_embedding.embeddings, [("model.embed_tokens.weight", None)], False)]
    for i, b in enumerate(model.blocks):
        p, a = f"model.layers.{i}.", b.attn
        q, kv = a.n_head * a.head_dim, a.n_kv_head * a.head_dim
        out += [(b.ln1.scale, [(p + "input_layernorm.weight", None)], False),
                (a.qkv.kernel, [(p + "self_attn.q_proj.weight", q), (p + "self_attn.k_proj.weight", kv),
                                (p + "self_attn.v_proj.weight", kv)], True),
                (a.proj.kernel, [(p + "self_attn.o_proj.weight", None)], True),
                (b.ln2.scale, [(p + "post_attention_layernorm.weight", None)], False),
                (b.fc.kernel, [(p + "mlp.gate_proj.weight", b.hidden), (p + "mlp.up_proj.weight", b.hidden)], True),
                (b.fc_out.kernel, [(p + "mlp.down_proj.weight", None)], True)]
        if a.q_norm is not None:
            out += [(a.q_norm.scale, [(p + "self_attn.q_norm.weight", None)], False),
                    (a.k_norm.scale, [(p + "self_attn.k_norm.weight", None)], False)]
    out.append((model.ln_f.scale, [("model.norm.weight", None)], False))
    if model.head is not None:
        out.append((model.head.kernel, [("lm_head.weight", None)], True))
    return out


def _pieces(shape, parts, transposed) -> list[tuple[str, tuple, slice]]:
    """(HF name, HF shape, our column slice) of each part of a variable of `shape`."""
    out, start = [], 0
    for name, columns in parts:
        columns = shape[-1] if columns is None else columns
        cut = slice(start, start + columns)
        start += columns
        piece_shape = tuple(shape[:-1]) + (columns,)
        out.append((name, piece_shape[::-1] if transposed else piece_shape, cut))
    return out


def hf_tensors(model) -> dict[str, np.ndarray]:
    """The model's weights under the HF class's tensor names, float32."""
    tensors = {}
    for variable, parts, transposed in _entries(model):
        value = np.asarray(variable.numpy(), np.float32)
        for name, _, cut in _pieces(value.shape, parts, transposed):
            piece = value[..., cut]
            tensors[name] = np.ascontiguousarray(piece.T if transposed else piece)
    return tensors


def expected_shapes(model) -> dict[str, tuple]:
    """HF tensor name -> shape the model needs (checked before any value is read)."""
    return {name: shape for variable, parts, transposed in _entries(model)
            for name, shape, _ in _pieces(tuple(variable.shape), parts, transposed)}


def settings_shapes(settings: dict) -> dict[str, tuple]:
    """HF tensor name -> shape for the model.* settings `model_settings` returns, without
    building anything: what the safetensors header must hold (equal to expected_shapes of the
    model those settings build; tests/export/test_hf.py checks both per class)."""
    s, width, vocab = settings, settings["d_model"], settings["vocab_size"]
    head = {} if s["tie_embeddings"] else {"lm_head.weight": (vocab, width)}
    if s["arch"] == "gpt2":
        inner = s["mlp_ratio"] * width
        out = {"transformer.wte.weight": (vocab, width),
               "transformer.wpe.weight": (s["context_length"], width)}
        for i in range(s["n_layer"]):
            h = f"transformer.h.{i}."
            out.update({h + "ln_1.weight": (width,), h + "ln_1.bias": (width,),
                        h + "attn.c_attn.weight": (width, 3 * width), h + "attn.c_attn.bias": (3 * width,),
                        h + "attn.c_proj.weight": (width, width), h + "attn.c_proj.bias": (width,),
                        h + "ln_2.weight": (width,), h + "ln_2.bias": (width,),
                        h + "mlp.c_fc.weight": (width, inner), h + "mlp.c_fc.bias": (inner,),
                        h + "mlp.c_proj.weight": (inner, width), h + "mlp.c_proj.bias": (width,)})
        return dict(out, **{"transformer.ln_f.weight": (width,), "transformer.ln_f.bias": (width,)}, **head)
    dim = width // s["n_head"]
    q, kv, hidden = s["n_head"] * dim, s["n_kv_head"] * dim, s["mlp_hidden"]
    out = {"model.embed_tokens.weight": (vocab, width)}
    for i in range(s["n_layer"]):
        p = f"model.layers.{i}."
        out.update({p + "input_layernorm.weight": (width,), p + "self_attn.q_proj.weight": (q, width),
                    p + "self_attn.k_proj.weight": (kv, width), p + "self_attn.v_proj.weight": (kv, width),
                    p + "self_attn.o_proj.weight": (width, q), p + "post_attention_layernorm.weight": (width,),
                    p + "mlp.gate_proj.weight": (hidden, width), p + "mlp.up_proj.weight": (hidden, width),
                    p + "mlp.down_proj.weight": (width, hidden)})
        if s["qk_norm"]:
            out.update({p + "self_attn.q_norm.weight": (dim,), p + "self_attn.k_norm.weight": (dim,)})
    return dict(out, **{"model.norm.weight": (width,)}, **head)


def check_shapes(model, shapes: dict[str, tuple], source: str) -> None:
    """HFShapeMismatch naming the first missing, differently shaped or surplus tensor."""
    compare_shapes(expected_shapes(model), shapes, source)


def compare_shapes(expected: dict[str, tuple], shapes: dict[str, tuple], source: str) -> None:
    """HFShapeMismatch naming the first tensor of `expected` missing from or shaped otherwise in
    `shapes`, or the first surplus one."""
    for name, shape in expected.items():
        if name not in shapes:
            raise HFShapeMismatch(f"{source}: no tensor {name} (shape {list(shape)}); the config "
                                  "builds a model the checkpoint does not hold")
        if tuple(shapes[name]) != shape:
            raise HFShapeMismatch(f"{source}: tensor {name} has shape {list(shapes[name])} but "
                                  f"this config's model needs {list(shape)} (model.* and "
                                  "data.seq_len must match the checkpoint)")
    surplus = sorted(set(shapes) - set(expected))
    if surplus:
        raise HFShapeMismatch(f"{source}: this model has no place for tensor {surplus[0]} "
                              f"({len(surplus)} unused)")


def assign_hf_tensors(model, tensors: dict[str, np.ndarray], source: str) -> int:
    """The inverse of hf_tensors: every variable of the model from the HF tensors (shapes
    checked first); returns the number of variables assigned."""
    check_shapes(model, {k: v.shape for k, v in tensors.items()}, source)
    entries = _entries(model)
    for variable, parts, transposed in entries:
        pieces = [np.asarray(tensors[name], np.float32) for name, _, _ in
                  _pieces(tuple(variable.shape), parts, transposed)]
        pieces = [p.T if transposed else p for p in pieces]
        variable.assign(pieces[0] if len(pieces) == 1 else np.concatenate(pieces, axis=-1))
    return len(entries)
