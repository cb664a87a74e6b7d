"""A Hugging Face warm-start source (`train.init_from=hf:DIR`) checked before anything is built,
without TensorFlow: at plan time (`check_init_from`: the run refuses it before any stage, from
the config alone) and again in the Trainer with the data's own tokenizer (`check_hf_source`).
Each failure is a named error of components/serving/hf: the directory or config.json missing,
an unsupported class or setting (UnsupportedHFClass), a size the config does not build or a
tensor in the safetensors header of another shape than config.json implies (HFShapeMismatch,
from the header alone: no tensor is read), weights and optimizer state beyond the device
(CheckpointTooLarge), a tokenizer file missing (MissingTokenizerFile) or not the data's.
"""

from __future__ import annotations

HF_PREFIX = "hf:"


def hf_source(init_from: str) -> str | None:
    """The directory of `train.init_from=hf:DIR`, else None."""
    return init_from[len(HF_PREFIX):] if init_from.startswith(HF_PREFIX) else None


def _config_sizes(config) -> dict:
    """The settings an HF config.json must agree with, as this config builds them."""
    from components.model.shapes import swiglu_hidden
    from components.tokenizer.spec import token_spec
    m = config.model
    sizes = dict(arch=m.arch, n_layer=m.n_layer, n_head=m.n_head, d_model=m.d_model,
                 tie_embeddings=m.tie_embeddings, vocab_size=token_spec(config.data).vocab_size)
    if m.arch == "gpt2":
        return dict(sizes, mlp_ratio=m.mlp_ratio, context_length=config.data.seq_len)
    return dict(sizes, n_kv_head=m.n_kv_head or m.n_head, rope_theta=m.rope_theta,
                norm_eps=m.norm_eps, qk_norm=m.qk_norm,
                mlp_hidden=swiglu_hidden(m.d_model, m.mlp_ratio, m.mlp_hidden))


def check_hf_memory(config, settings: dict, n_params: int, hf_dir: str) -> None:
    """CheckpointTooLarge when the checkpoint's weights, AdamW moments and gradients alone (no
    activation yet) exceed a replica's device memory (components/training/memory.py)."""
    from components import config as config_lib
    from components.serving.hf import CheckpointTooLarge
    from components.training import memory
    replicas = config_lib.expected_replicas(config)
    available = memory.device_memory_bytes(config.runtime, replicas)
    model = {k: v for k, v in settings.items() if k not in ("vocab_size", "context_length")}
    estimate = memory.estimate(config_lib.merge(config, {"model": model}), n_params, replicas,
                               available, vocab_size=settings["vocab_size"])
    fixed = estimate.parameters + estimate.optimizer_state + estimate.gradients
    if available and fixed > available:
        raise CheckpointTooLarge(
            f"train.init_from=hf:{hf_dir}: {n_params:,} parameters need ~{fixed / memory.GIB:.1f} "
            f"GiB per replica for weights, optimizer state and gradients before any activation; "
            f"the device has {available / memory.GIB:.1f} GiB (runtime.device_memory_gb; "
            "train.shard_optimizer_state or runtime.pipeline_stages split them)")


def check_hf_settings(config, hf_dir: str) -> dict:
    """The directory's class, sizes and tensor shapes against this config (config.json and the
    safetensors header only); returns config.json."""
    from components.serving.hf import CONFIG_FILE, WEIGHTS_FILE, HFShapeMismatch, directory, mapping
    hf_config = directory.read_config(hf_dir)
    settings = mapping.model_settings(hf_config, hf_dir)
    shapes = directory.tensor_shapes(hf_dir)
    check_hf_memory(config, settings, directory.parameter_count(hf_dir), hf_dir)
    for key, ours in _config_sizes(config).items():
        theirs = settings.get(key, ours)
        if theirs != ours:
            where = "data.seq_len" if key == "context_length" else (
                "the tokenizer's vocabulary" if key == "vocab_size" else f"model.{key}")
            raise HFShapeMismatch(f"train.init_from=hf:{hf_dir}: the checkpoint has {key}="
                                  f"{theirs!r} but this config builds {where}={ours!r}")
    mapping.compare_shapes(mapping.settings_shapes(settings), shapes,
                           f"train.init_from=hf:{hf_dir} ({WEIGHTS_FILE} against its {CONFIG_FILE})")
    return hf_config


def check_hf_source(config, hf_dir: str, tokenizer) -> dict:
    """Everything about an HF warm-start source that can fail, before any model is built:
    UnsupportedHFClass, CheckpointTooLarge, HFShapeMismatch (naming the model.* setting or the
    tensor that differs), MissingTokenizerFile. Returns the lineage facts (the directory and its
    digest)."""
    from components.serving.hf import directory
    hf_config = check_hf_settings(config, hf_dir)
    directory.check_tokenizer(hf_dir, tokenizer)
    from components.model import properties as model_props
    return {model_props.INIT_FROM_HF_DIR: hf_dir,
            model_props.INIT_FROM_HF_DIGEST: directory.directory_digest(hf_dir),
            model_props.INIT_FROM_HF_CLASS: hf_config["architectures"][0]}


def check_init_from(config) -> None:
    """At plan time, from the config alone: `train.init_from=hf:DIR` exists, holds config.json,
    model.safetensors and the tokenizer files data.tokenizer needs, and fits this config (the
    byte tokenizer's ids are checked too; a SentencePiece model trained in the run is compared
    in the Trainer). Nothing for other sources."""
    from components.serving.hf import directory
    hf_dir = hf_source(config.train.init_from)
    if hf_dir is None:
        return
    check_hf_settings(config, hf_dir)
    if config.data.tokenizer == "bytes":
        from components.tokenizer.byte_level import ByteTokenizer
        directory.check_tokenizer(hf_dir, ByteTokenizer())
    else:
        directory.check_tokenizer_files(hf_dir, config.data.tokenizer)


def init_from_fingerprint(config) -> str | None:
    """For `train.init_from=hf:DIR`: the fingerprint of DIR's files from listing metadata (names,
    sizes, modification times: components/storage/listing.py's rule, no bytes read), so the
    up-to-date check notices new weights at the same path; None for other sources."""
    from components.storage.listing import input_fingerprint, list_input_files
    hf_dir = hf_source(config.train.init_from)
    if hf_dir is None:
        return None
    return input_fingerprint(list_input_files(hf_dir)[1])
