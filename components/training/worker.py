"""Training outside TFX: one process of a (possibly multi-worker) training job.

`bigtrain train-worker --examples DIR --out DIR` trains on an Examples artifact's shards with the
config's strategy. With runtime.strategy=multi_worker_mirrored, start one such process per machine
with its own TF_CONFIG; every worker computes, only the chief writes the SavedModel. With
runtime.strategy=parameter_server this is the chief (TF_CONFIG task type chief), which coordinates
the ps and worker tasks (`bigtrain plumbing ps-task`; parameter_server.py)."""

from __future__ import annotations

import json
import os

import numpy as np

from components.storage import checkpoints, fs, splits


def train_worker(config, examples_dir: str, out_dir: str, weights_out: str | None = None) -> dict:
    from components.serving.export import export_saved_model
    from components.tokenizer.artifact import examples_tokenizer
    from components.training import loop
    from components.training.strategy import make_strategy

    if config.runtime.strategy == "parameter_server":
        return _coordinate(config, examples_dir, out_dir, weights_out)
    strategy = make_strategy(config.runtime)  # first: collectives must start before other TF ops
    result = loop.train(config, [os.path.join(splits.split_dir(examples_dir, "train"), "*")],
                        os.path.join(out_dir, "model_run"), checkpoints.root(out_dir),
                        strategy=strategy)
    summary = {"steps": result.steps, "resumed_from_step": result.resumed_from_step,
               "final_loss": result.final_loss, "tokens_per_second": result.tokens_per_second,
               "num_replicas": result.num_replicas, "is_chief": result.is_chief}
    if weights_out:
        np.savez(weights_out, *result.model.get_weights())
    if result.is_chief:
        export_saved_model(result.model, config.model, config.data.seq_len,
                           os.path.join(out_dir, "serving_model"), metadata={"training": summary},
                           tokenizer=examples_tokenizer(examples_dir, config.data, "train-worker"))
        fs.write_text(os.path.join(out_dir, "training_summary.json"), json.dumps(summary, indent=2))
    return summary


def _coordinate(config, examples_dir: str, out_dir: str, weights_out: str | None) -> dict:
    """runtime.strategy=parameter_server's chief: train through the cluster, then export as the
    chief of any strategy does."""
    from components.serving.export import export_saved_model
    from components.tokenizer.artifact import examples_tokenizer
    from components.training import parameter_server

    result = parameter_server.train_coordinated(
        config, [os.path.join(splits.split_dir(examples_dir, "train"), "*")], checkpoints.root(out_dir))
    summary = parameter_server.summary(result)
    if weights_out:
        np.savez(weights_out, *result.model.get_weights())
    export_saved_model(result.model, config.model, config.data.seq_len,
                       os.path.join(out_dir, "serving_model"), metadata={"training": summary},
                       tokenizer=examples_tokenizer(examples_dir, config.data, "train-worker"))
    fs.write_text(os.path.join(out_dir, "training_summary.json"), json.dumps(summary, indent=2))
    return summary
