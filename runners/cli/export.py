"""The files the CLI writes where the user points --out: `bigtrain export hf` (a trained model in
the Hugging Face layout, components/serving/hf, from a pushed version, a run id or a model folder,
with a model card from lineage) and `bigtrain lineage graph --out` (write_graph_files); neither
overwrites what it did not write."""

from __future__ import annotations

import argparse
import functools
import os

from components.storage import fs
from components.common.errors import NotFoundError, OutputError
from runners.cli.options import config_options, resolve_config
from runners.local.logs import configure_logging


def lineage_facts(args, open_lineage, **model) -> dict:
    """Card facts of the run that trained a model (pipeline/lineage/card_facts.py model_facts:
    model_id= a push record's, or model_uri= a model folder), when the store of --home /
    --metadata exists and holds it; else {} (the card then says what the model itself records)."""
    from runners.local import metadata as metadata_lib
    if not metadata_lib.store_exists(resolve_config(args)):
        return {}
    from pipeline.lineage.card_facts import model_facts
    return model_facts(open_lineage(args), **model)


def _pushed(args, open_lineage, path: str, version) -> tuple[str, dict]:
    """A pushed version folder: its push record names the model (its MLMD id and folder)."""
    from components.push.layout import read_push_record
    record = read_push_record(path)
    facts = lineage_facts(args, open_lineage, model_id=record.get("model_id"),
                          model_uri=record.get("model_uri"))
    return record["model_uri"], dict(facts, pushed_version=version or record.get("version"),
                                     source=path)


def export_source(args, open_lineage, served_model_dir) -> tuple[str, dict]:
    """(Model artifact folder, card facts) for SOURCE: a folder (a model folder, its
    Format-Serving, or a pushed version, whose push record names its model), a pushed version
    number under <serving dir>/<model>, or a run id (MLMD: the model its Trainer wrote). The
    facts of a folder or version come from the run that trained the model, when the store
    knows it."""
    from components.storage import fs
    from components.push.layout import PUSH_RECORD, version_dir
    from components.serving.hf.source import model_dir_of
    source = args.source
    if source.isdigit() and not os.path.exists(source):
        path = version_dir(served_model_dir(resolve_config(args), args.model), int(source))
        if not fs.exists(fs.join(path, PUSH_RECORD)):
            raise NotFoundError(f"bigtrain export hf: no pushed version {source} ({path})")
        return _pushed(args, open_lineage, path, int(source))
    if fs.is_remote(source) or os.path.isdir(source):
        if fs.exists(fs.join(source, PUSH_RECORD)):
            return _pushed(args, open_lineage, source, None)
        model_dir = model_dir_of(source)
        uri = model_dir if fs.is_remote(model_dir) else os.path.abspath(model_dir)
        return source, dict(lineage_facts(args, open_lineage, model_uri=uri), source=source)
    from pipeline.lineage.card_facts import card_facts
    if os.sep in source or source.startswith("."):   # a path, not a run id: it does not exist
        raise NotFoundError(f"bigtrain export hf: {source} does not exist (SOURCE: a model "
                            "folder, a pushed version number or a run id)")
    facts = card_facts(open_lineage(args), source)
    if not facts["model_uri"]:
        raise NotFoundError(f"bigtrain export hf: run {facts['run_id']} wrote no model (its "
                            "Trainer was cached or failed); give the run that trained it, or a "
                            "pushed version")
    return facts.pop("model_uri"), dict(facts, source=f"run {facts['run_id']}")


def _refuse_a_file(out: str) -> None:
    """--out names a folder: an existing file there is the user's, never replaced."""
    if os.path.lexists(out) and not os.path.isdir(out):
        raise OutputError(f"--out {out}: exists and is not a folder; choose a new folder")


def check_out_dir(out: str, protected: list[str], force: bool) -> None:
    """Refuse an --out that is a file, lies inside a protected folder (the home, the serving
    folder: their files are bigtrain's state and served models), or holds files that
    `bigtrain export hf` did not write; one it wrote is replaced with --force only."""
    from components.serving.hf import CARD_FILE, LAYOUT_FILES
    from components.serving.hf.card import CARD_MARKER
    if fs.is_remote(out):   # an object store: no folders to resolve; same content rule
        names = {os.path.basename(p.rstrip("/")) for p in fs.glob(fs.join(out, "*"))}
    else:
        real = os.path.realpath(out)
        for root in protected:
            if root and "://" not in root and os.path.commonpath(
                    [real, os.path.realpath(root)]) == os.path.realpath(root):
                raise OutputError(f"--out {out}: inside {root}, whose files are bigtrain's own "
                                  "state or served models; choose a folder outside it")
        _refuse_a_file(out)
        names = set(os.listdir(out)) if os.path.isdir(out) else set()
    foreign = sorted(names - set(LAYOUT_FILES))
    if foreign:
        raise OutputError(f"--out {out}: holds files `bigtrain export hf` did not write "
                          f"({', '.join(foreign[:3])}); choose a new or empty folder")
    if not names:
        return
    ours = CARD_FILE in names and CARD_MARKER in fs.read_text(fs.join(out, CARD_FILE))
    if not ours:
        raise OutputError(f"--out {out}: holds {', '.join(sorted(names)[:3])} that `bigtrain "
                          f"export hf` did not write (no model card of ours); choose a new or "
                          f"empty folder")
    if not force:
        raise OutputError(f"--out {out}: holds an earlier `bigtrain export hf`; --force replaces it")


def cmd_export_hf(args: argparse.Namespace, open_lineage, served_model_dir) -> int:
    configure_logging(args.verbose)
    config = resolve_config(args)
    check_out_dir(args.out, [config.paths.home, os.path.dirname(served_model_dir(config))],
                  args.force)
    from components.serving.hf.card import facts_from_model_info
    from components.serving.hf.directory import write_hf_directory
    from components.serving.hf.source import load_exported
    model_dir, facts = export_source(args, open_lineage, served_model_dir)
    model, tokenizer, info = load_exported(model_dir)
    card = facts_from_model_info(info)
    for key, value in facts.items():   # lineage adds to what the model itself records
        if value in (None, [], {}):
            continue
        card[key] = dict(card.get(key) or {}, **value) if isinstance(value, dict) else value
    card.setdefault("model_name", (info.get("config") or {}).get("model", {}).get("name"))
    files = write_hf_directory(model, tokenizer, args.out, dtype=args.dtype, facts=card)
    print(f"{args.out}: {', '.join(files)} ({type(model).__name__} {model.arch} -> "
          f"{len(files)} files, {args.dtype})")
    return 0


def add_export(sub, common: list, *, open_lineage, served_model_dir) -> None:
    """`bigtrain export hf`; open_lineage and served_model_dir are the CLI's own (runners/cli/app.py)."""
    export = sub.add_parser("export", parents=common, help="write a trained model in another format",
                            description="Write a trained model in a format other engines load.")
    esub = export.add_subparsers(dest="export_format", metavar="FORMAT", required=True)
    hf = esub.add_parser(
        "hf", parents=common + [config_options(with_preset=False)],
        help="the Hugging Face layout (config.json, model.safetensors, tokenizer, model card)",
        description="Write SOURCE as a Hugging Face model directory: GPT2LMHeadModel (model.arch="
                    "gpt2), LlamaForCausalLM (llama) or Qwen3ForCausalLM (llama with qk_norm), "
                    "its tokenizer and a model card from lineage (docs/serving.md).")
    hf.add_argument("source", metavar="SOURCE",
                    help="a pushed version (a number: <serving dir>/<model>/<N>), a run id (unique "
                         "prefix, latest, latest~N) or a model folder / its SavedModel")
    hf.add_argument("--out", required=True, metavar="DIR", help="directory to write")
    hf.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                    help="tensor dtype in model.safetensors (default float32)")
    hf.add_argument("--model", help="model name of a pushed version (default: model.name)")
    hf.add_argument("--force", action="store_true",
                    help="replace --out when it holds an earlier `bigtrain export hf` (never a "
                         "folder with other files)")
    hf.set_defaults(func=functools.partial(cmd_export_hf, open_lineage=open_lineage,
                                           served_model_dir=served_model_dir))


GRAPH_FORMATS = ("dot", "mmd", "svg", "png")


def write_graph_files(graph: dict, out_dir: str) -> dict:
    """graph.dot, graph.mmd, graph.svg and graph.png in out_dir; returns {format: path}. An
    out_dir that is a file, or already holds one of these names, is an OutputError (exit 9):
    whose files they are cannot be told, so none is overwritten."""
    from pipeline.lineage import render
    _refuse_a_file(out_dir)
    present = [f"graph.{ext}" for ext in GRAPH_FORMATS
               if os.path.lexists(os.path.join(out_dir, f"graph.{ext}"))]
    if present:
        raise OutputError(f"--out {out_dir}: already holds {', '.join(present)}; choose another "
                          f"folder (nothing is overwritten)")
    os.makedirs(out_dir, exist_ok=True)
    written = {}
    for ext, make in (("dot", render.to_dot), ("mmd", render.to_mermaid), ("svg", render.to_svg)):
        written[ext] = os.path.join(out_dir, f"graph.{ext}")
        with open(written[ext], "w", encoding="utf-8") as fh:
            fh.write(make(graph))
    written["png"] = os.path.join(out_dir, "graph.png")
    render.to_png(graph, written["png"])
    return written
