"""The model card (README.md of a Hugging Face directory), rendered from lineage facts.

The facts are a plain dict, gathered by whoever knows them (the CLI reads MLMD through the
lineage package, the Pusher its own execution; both sit above this module):
  run_id, pushed_version, model_name, source      strings (or None: "not recorded")
  data_sources   [{"input": ..., "documents": n, ...}]   one row per raw source, its counts
  data_counts    {name: number}                 what the data stage kept and dropped
  training       {setting: value}               model.*, train.* and the training figures
  evaluation     {figure: value}                eval loss, bits per byte and the compressor
                                                baselines (zlib9/lzma9 bits per byte)
  standing       [line]                         the whole-document standing (lineage only)
  input_fingerprint                             the data stage's fingerprint of its input
`facts_from_model_info` fills what the exported SavedModel itself records (its MODEL_INFO: the
config, the training summary and, from the Examples it was trained on,
components/serving/data_facts.py `data_facts`), so a card
has the data sources and counts even where no metadata store is at hand; lineage adds the run id,
the evaluator's figures and the pushed version.
"""

from __future__ import annotations

from components.model import properties as model_props

EVAL_FIGURES = (model_props.EVAL_LOSS, model_props.EVAL_BITS_PER_BYTE, model_props.ZLIB9_BITS_PER_BYTE, model_props.LZMA9_BITS_PER_BYTE,
                model_props.UNIGRAM_BASELINE_LOSS, model_props.EVAL_ACCURACY, model_props.EVAL_LOSS_STANDARD_ERROR,
                model_props.EVAL_SAMPLE_SEQUENCES)
# The card's words that say bigtrain wrote the folder (`export hf --force` replaces only such).
CARD_MARKER = "exported by bigtrain (`bigtrain export hf`)"
TRAINING_FIGURES = (model_props.STEPS, model_props.TOKENS_SEEN, model_props.FINAL_LOSS, model_props.PARAMETER_COUNT, model_props.PRECISION,
                    model_props.NUM_REPLICAS, model_props.INIT_FROM, model_props.CONFIG_DIGEST, model_props.CODE_DIGEST)


def facts_from_model_info(info: dict) -> dict:
    """Card facts from an exported model's MODEL_INFO (its config, training summary and data)."""
    config, summary = info.get("config") or {}, info.get("training") or {}
    training = {f"model.{k}": v for k, v in (config.get("model") or {}).items()}
    training.update({f"train.{k}": v for k, v in (config.get("train") or {}).items()
                     if k in ("steps", "learning_rate", "global_batch_size", "schedule", "seed",
                              "warmup_steps", "weight_decay", "init_from")})
    training.update({f"data.{k}": v for k, v in (config.get("data") or {}).items()})
    training.update({k: summary[k] for k in TRAINING_FIGURES if k in summary})
    data = info.get("data") or {}
    return {"training": training, "data_sources": list(data.get("data_sources") or []),
            "data_counts": dict(data.get("data_counts") or {}),
            "input_fingerprint": data.get("input_fingerprint"),
            "evaluation": {k: summary[k] for k in EVAL_FIGURES if k in summary}}


def _value(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "not recorded" if value is None else str(value)


def _table(rows: dict) -> list[str]:
    if not rows:
        return ["not recorded", ""]
    return ["| name | value |", "|---|---|"] + [f"| `{k}` | {_value(v)} |" for k, v in rows.items()] + [""]


def _sources(sources: list[dict]) -> list[str]:
    if not sources:
        return ["not recorded", ""]
    keys = list(dict.fromkeys(k for row in sources for k in row))
    return ([f"| {' | '.join(keys)} |", "|" + "---|" * len(keys)]
            + [f"| {' | '.join(_value(row.get(k)) for k in keys)} |" for row in sources] + [""])


def compressor_line(evaluation: dict) -> str:
    """The model's bits per byte against the general-purpose compressors on the same text."""
    model = evaluation.get(model_props.EVAL_BITS_PER_BYTE)
    baselines = {name: evaluation[f"{name}9_bits_per_byte"] for name in ("zlib", "lzma")
                 if f"{name}9_bits_per_byte" in evaluation}
    if model is None or not baselines:
        return "Compressor baselines: not recorded."
    parts = ", ".join(f"{name} -9 {value:.3f}" for name, value in baselines.items())
    return (f"Bits per byte on the eval sample (packed eval windows, what training optimises): this "
            f"model {model:.3f}; compressors on the same windows: {parts}.")


def render_card(config: dict, facts: dict) -> str:
    """README.md: YAML front matter, then what the model is, where its data came from, how it
    was trained and how it measured."""
    cls = config["architectures"][0]
    name = facts.get("model_name") or "bigtrain model"
    lines = ["---", "library_name: transformers", "pipeline_tag: text-generation",
             "tags: [bigtrain, causal-lm]", "---", "", f"# {name}", "",
             f"A `{cls}` {CARD_MARKER}.", "",
             "| lineage | value |", "|---|---|",
             f"| run id | {_value(facts.get('run_id'))} |",
             f"| pushed version | {_value(facts.get('pushed_version'))} |",
             f"| exported from | {_value(facts.get('source'))} |",
             f"| input fingerprint | {_value(facts.get('input_fingerprint'))} |", "",
             "## Model", ""] + _table({k: config[k] for k in sorted(config) if k != "architectures"})
    lines += ["## Data sources", ""] + _sources(facts.get("data_sources") or [])
    lines += ["## Data counts", ""] + _table(facts.get("data_counts") or {})
    lines += ["## Training settings", ""] + _table(facts.get("training") or {})
    evaluation = facts.get("evaluation") or {}
    # standing: the whole-document lines lineage reads from the Evaluator (pipeline/lineage/standing.py)
    standing = [f"- {line}" for line in facts.get("standing") or []]
    lines += ["## Evaluation", ""] + (standing + [""] if standing else []) + _table(evaluation) + \
        [compressor_line(evaluation), ""]
    return "\n".join(lines)
