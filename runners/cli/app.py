"""The `bigtrain` command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from importlib import metadata as importlib_metadata

from components import config as config_lib
from components.common.errors import (EXIT_BROKEN_PIPE, EXIT_CONFIG, EXIT_FAILED, EXIT_INTERRUPTED,
                                      BigtrainError, HomeError, NotFoundError)
from runners.local import metadata as metadata_lib
from runners.cli.options import (beam_options, config_options, global_options, int32_in,
                                 output_options, resolve_config)
from runners.cli.export import add_export, write_graph_files
from runners.cli.plumbing import add_plumbing
from runners.cli.ui import add_ui
from runners.local.logs import configure_logging


def bigtrain_version() -> str:
    try:
        return importlib_metadata.version("bigtrain")
    except importlib_metadata.PackageNotFoundError:  # a source tree that was never installed
        return "unknown (not installed)"


def cmd_config(args: argparse.Namespace) -> int:
    import yaml
    config = resolve_config(args)
    yaml.safe_dump(config_lib.to_dict(config), sys.stdout, sort_keys=False)
    if args.fit:  # which layouts of this model fit N devices of G GiB (YAML comments)
        from components.training.memory import fit_table
        devices, _, gib = args.fit.partition("x")
        for line in fit_table(config, int(devices), float(gib or 80)):
            print(f"# {line}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from runners.local.run import run_command
    return run_command(resolve_config(args), verbose=args.verbose, force=args.force,
                       until=args.until)


def served_model_dir(config: config_lib.Config, model: str | None = None) -> str:
    """<serving dir>/<model>: where a run of this config pushes (LocalPaths, as `bigtrain run`
    resolves orchestrator.serving_dir: a path, s3:// or gs://; empty: <home>/serving)."""
    from components.push.layout import model_base
    from runners.local.home import LocalPaths
    return model_base(LocalPaths.for_config(config).serving_dir, model or config.model.name)


def cmd_generate(args: argparse.Namespace) -> int:
    from components.storage import fs
    from components.push.layout import served_versions, version_dir
    base = served_model_dir(resolve_config(args), args.model)
    fs.prepare(base)  # s3:// needs tensorflow-io's filesystem before TensorFlow loads from it
    versions = served_versions(base)
    if not versions:
        print(f"bigtrain generate: no pushed model under {base} (run `bigtrain run` first; only "
              f"blessed models are pushed)", file=sys.stderr)
        return EXIT_FAILED
    version = args.version if args.version is not None else versions[-1]
    if version not in versions:
        print(f"bigtrain generate: version {version} not in {base} (have {versions})", file=sys.stderr)
        return EXIT_FAILED
    configure_logging(args.verbose)
    import tensorflow as tf
    path = version_dir(base, version)
    try:
        model = tf.saved_model.load(path)
    except Exception as err:  # noqa: BLE001 (truncated or damaged: protobuf, IO or TF errors)
        raise NotFoundError(f"bigtrain generate: the pushed version {path} cannot be loaded "
                            f"({type(err).__name__}: {str(err).splitlines()[0][:200]}); push "
                            "again, or pass --version for another") from None
    # The prompt as the bytes given: an argument that is not UTF-8 arrives with surrogate escapes.
    prompt = os.fsencode(args.prompt)
    try:  # the signatures take a batch of prompts; bad values are InvalidArgument from the graph
        if args.temperature != 0:  # a negative temperature is the signature's error
            out = model.signatures["sample"](
                prompt=tf.constant([prompt]), max_new_tokens=tf.constant([args.max_new_tokens]),
                temperature=tf.constant([args.temperature], tf.float32), seed=tf.constant([args.seed]),
                top_k=tf.constant([0]), top_p=tf.constant([1.0]), stop=tf.constant([""]))
        else:
            out = model.signatures["generate"](prompt=tf.constant([prompt]),
                                               max_new_tokens=tf.constant([args.max_new_tokens]))
    except tf.errors.InvalidArgumentError as err:
        import re
        found = re.search(r"assertion failed: \[([^\]]*)\]", err.message)  # the signature's own words
        print(f"bigtrain generate: {found.group(1).strip() if found else err.message.splitlines()[0]}",
              file=sys.stderr)
        return EXIT_FAILED
    print(f"[{path}]", file=sys.stderr)
    print(prompt.decode("utf-8", errors="replace") + out["text"].numpy()[0].decode(
        "utf-8", errors="replace"))
    return 0


def cmd_compile(args: argparse.Namespace) -> int:
    from runners.local.eval_homes import resolve_eval_homes
    # home:<path> evaluation sets are resolved now: the compiled pipeline names their Examples.
    config = resolve_eval_homes(config_lib.with_scheduled_paths(resolve_config(args)))
    configure_logging(args.verbose)
    if args.target == "kubeflow":
        from runners.orchestrators.kubeflow import compile_kubeflow
        path = compile_kubeflow(config, args.out)
        print(f"KFP v2 pipeline spec: {path} (image {config.orchestrator.image}, pipeline root "
              f"{config.orchestrator.pipeline_root})")
    elif args.target in ("rayjob", "tfjob"):
        from runners.orchestrators.k8s_jobs import write_manifests
        path = write_manifests(config, args.target, args.out, args.examples, args.train_out)
        print(f"Kubernetes manifests (ConfigMap + {args.target}): {path} (kubectl apply -f)")
    else:
        from runners.orchestrators.airflow import write_dag_file
        path = write_dag_file(config, args.out)
        print(f"Airflow DAG file: {path} (copy it into your dags folder)")
    return 0


def open_lineage(args: argparse.Namespace):
    """The Lineage reader of the store the config, --metadata or $BIGTRAIN_METADATA names."""
    from pipeline.lineage.store import Lineage
    from pipeline.lineage.connection import open_store
    from runners.local.lock import live_writer
    config = resolve_config(args)
    home = os.path.abspath(config.paths.home)
    if config.metadata.backend == "sqlite" and not config.metadata.sqlite_path and not os.path.isdir(home):
        raise HomeError(f"home {home} does not exist (pass --home or --metadata, or run "
                        "`bigtrain run` first)")
    store = open_store(metadata_lib.connection(config, read_only=True))
    # Never waits on a run: reads the lock file's record, takes no lock (runners/local/lock.py).
    return Lineage(store, live_writer=live_writer(home) if os.path.isdir(home) else None)


def _page_number(text: str) -> int:
    """--page: a whole number from 1 (argparse names the option in its usage error, exit 2)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: pages are numbered 1, 2, ...")
    return int(text)


def cmd_lineage(args: argparse.Namespace) -> int:
    from pipeline.lineage import content, queries, render, run_diff
    lin = open_lineage(args)
    what = args.lineage_command
    if what == "runs":
        result, text = queries.list_runs(lin, limit=args.limit or None), render.runs_text
    elif what == "trace" and args.down:  # an artifact, or an input file of the data stage
        result = content.trace_down(lin, args.target, page=args.page)
        text = render.input_file_text if "input_file" in result else render.trace_text
    elif what == "trace":
        result, text = queries.trace(lin, args.target, page=args.page), render.trace_text
    elif what == "summary":
        result, text = content.summary(lin, args.target), render.summary_markdown
    elif what == "diff":
        result, text = run_diff.diff(lin, args.run_a, args.run_b), render.diff_text
    elif what == "why":
        from runners.local.home import LocalPaths, with_home_run_log
        result = with_home_run_log(queries.why(lin, args.run),
                                   LocalPaths.for_config(resolve_config(args)))
        text = render.why_text
    elif args.out:  # graph, every format into a folder
        result = queries.graph(lin, args.run)
        result = dict(result, files=write_graph_files(result, args.out))
        text = lambda r: "\n".join(f"{k}: {v}" for k, v in r["files"].items())
    else:  # graph, one format on stdout
        result = queries.graph(lin, args.run)
        text = {"dot": render.to_dot, "mermaid": render.to_mermaid, "svg": render.to_svg}[args.format]
    print(json.dumps(result, indent=2, default=str) if args.json else text(result))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bigtrain", parents=[global_options(in_subcommand=False)],
        description="Train large TensorFlow models with a validated, lineage-tracked TFX pipeline.")
    parser.add_argument("--version", action="version", version=f"bigtrain {bigtrain_version()}",
                        help="print bigtrain's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = [global_options(in_subcommand=True)]
    _add_run(sub, common)
    _add_generate(sub, common)
    _add_compile(sub, common)
    _add_lineage(sub, common)
    add_ui(sub, common, open_lineage=open_lineage)
    add_export(sub, common, open_lineage=open_lineage, served_model_dir=served_model_dir)
    show = sub.add_parser("config", parents=common + [config_options(), beam_options()],
                          help="print the resolved config (preset + YAML + overrides)",
                          description="Print the resolved, validated config as YAML.")
    show.add_argument("--fit", default="8x80", metavar="NxGIB",
                      help="append (as YAML comments) which data-parallel, sharded and pipeline "
                           "layouts fit N devices of GIB GiB (default 8x80; empty: none)")
    show.set_defaults(func=cmd_config)
    add_plumbing(sub, common)
    return parser


def _add_run(sub, common: list) -> None:
    run = sub.add_parser("run", parents=common + [config_options(), beam_options()],
                         help="run the whole pipeline locally (data, validation, training, "
                              "evaluation, push) and print the run report",
                         description="Run the pipeline with LocalDagRunner and Beam's DirectRunner; "
                                     "state under --home (one run at a time per home). When "
                                     "nothing changed since the last complete run, print its "
                                     "report instead. Exit codes: 1 a stage failed, 2 bad config, "
                                     "3 validation gate, 4 home in use, 5 metadata store, "
                                     "6 home not usable, 7 disk full.")
    run.add_argument("--force", action="store_true",
                     help="run the pipeline even when up to date (TFX's per-stage cache still applies)")
    run.add_argument("--until", metavar="STAGE", help="stop after this stage (a name from the run "
                                                      "report, e.g. TextExampleGen or AnomaliesGate)")
    run.set_defaults(func=cmd_run)


def _add_generate(sub, common: list) -> None:
    gen = sub.add_parser("generate", parents=common + [config_options(with_preset=False)],
                         help="generate text with the newest pushed model",
                         description="Load the newest (or --version) pushed SavedModel from "
                                     "<serving dir>/<model>/ (where `bigtrain run` pushes: "
                                     "orchestrator.serving_dir, else <home>/serving) and "
                                     "continue PROMPT.")
    gen.add_argument("prompt", help="text to continue")
    gen.add_argument("--model", help="model name (default: the config's model.name, gpt)")
    gen.add_argument("--version", type=int, help="served version (default: the newest)")
    gen.add_argument("--max-new-tokens", type=int32_in(-2**31, 2**31 - 1), default=200,
                     help="tokens to generate (default 200)")
    gen.add_argument("--temperature", type=float, default=0.8,
                     help="sampling temperature; 0 = greedy (default 0.8)")
    gen.add_argument("--seed", type=int32_in(-2**31, 2**31 - 1), default=0,
                     help="sampling seed (default 0)")
    gen.set_defaults(func=cmd_generate)


def _add_compile(sub, common: list) -> None:
    comp = sub.add_parser("compile", parents=common + [config_options(), beam_options()],
                          help="compile the pipeline for Kubeflow Pipelines or Airflow",
                          description="kubeflow: a KFP v2 pipeline spec (JSON) from TFX's "
                                      "KubeflowV2DagRunner. airflow: a DAG file for AirflowDagRunner "
                                      "with the resolved config embedded. rayjob / tfjob: "
                                      "Kubernetes manifests (KubeRay RayJob, Kubeflow TFJob) of "
                                      "the multi-worker training, runtime.ray.* sizing them. "
                                      "Image, pipeline root, "
                                      "schedule etc. come from the orchestrator.* config keys.")
    comp.add_argument("target", choices=["kubeflow", "airflow", "rayjob", "tfjob"])
    comp.add_argument("--out", required=True, metavar="FILE", help="file to write")
    comp.add_argument("--examples", metavar="DIR", help="tfjob: the Examples artifact's folder")
    comp.add_argument("--train-out", metavar="DIR", help="tfjob: the workers' output folder")
    comp.set_defaults(func=cmd_compile)


def _add_lineage(sub, common: list) -> None:
    lineage = sub.add_parser("lineage", parents=common, help="answer lineage questions from ML Metadata",
                             description="Runs, traces, diffs, graphs and failures, read from MLMD "
                                         "by ids and events. RUN is a run id, a unique prefix, "
                                         "'latest' or 'latest~N'. The store: --metadata, else "
                                         "$BIGTRAIN_METADATA, else the config's metadata section.")
    lsub = lineage.add_subparsers(dest="lineage_command", metavar="QUESTION", required=True)
    question = common + [config_options(with_preset=False), output_options()]

    def add(name, help, description, *arguments):
        p = lsub.add_parser(name, parents=question, help=help, description=description)
        for names, options in arguments:
            p.add_argument(*names, **options)

    add("runs", "pipeline runs, newest first, with per-stage states",
        "Pipeline runs, newest first: id, start, duration, state, per-stage state, pushed version.",
        (["--limit"], dict(type=int, default=20, help="newest N runs (default 20; 0: all)")))
    add("trace", "walk from a pushed model / artifact to its raw data",
        "TARGET: a pushed model directory, an artifact URI or id; with --down also an input "
        "file (path or URI) of the data stage: the pushed versions trained on it. Walks "
        "upstream (default) or downstream (--down).", (["target"], {}),
        (["--down"], dict(action="store_true", help="walk downstream (what was made from it)")),
        (["--page"], dict(type=_page_number, metavar="N", help=(
            "list the Nth page (50 a page) of each step's cached runs that reused it (and, with "
            "--down, of its readers) instead of the first and last three"))))
    add("summary", "what a pushed model was trained on (Markdown; --json)",
        "The training-content summary of a pushed model, read from MLMD: sources with sizes, "
        "time span, weights and epochs, formats, every filter, dedup and sampling step with its "
        "counts, the tokenizer, the evaluation sets checked for contamination. TARGET: a pushed "
        "version (a number is read as a version first), a pushed model directory, or a Model / "
        "PushedModel id or URI.", (["target"], {}))
    add("diff", "what changed between two runs",
        "Input fingerprints, config values, code digest, metrics, and which stages ran or were "
        "cached, for two runs.", (["run_a"], {}), (["run_b"], {}))
    add("graph", "a run's artifact/execution graph (DOT, Mermaid, SVG, PNG)",
        "Print the graph (--format) or write graph.dot, graph.mmd, graph.svg and graph.png into "
        "--out DIR.", (["run"], dict(nargs="?", default="latest")),
        (["--format"], dict(choices=["dot", "mermaid", "svg"], default="dot")),
        (["--out"], dict(metavar="DIR", help="write every format into DIR")))
    add("why", "why a run failed: stage, root cause, log, inputs",
        "For a failed run: the failed stage, the root-cause error, the log location and the "
        "stage's input artifacts.", (["run"], dict(nargs="?", default="latest")))
    lineage.set_defaults(func=cmd_lineage)


def main(argv: list[str] | None = None) -> int:
    """Dispatch; every named error (BigtrainError, ConfigError) is one line on stderr and its exit
    code (docs/operations.md: exit codes), with the traceback only under -v. Anything else is a
    bug: its traceback always, then one line naming it and the -v hint, exit 1."""
    args = build_parser().parse_args(argv)
    verbose = args.verbose
    try:
        return args.func(args)
    except config_lib.ConfigError as err:
        code, message, error = EXIT_CONFIG, f"config error: {err}", err
    except BigtrainError as err:
        code, message, error = err.exit_code, str(err), err
    except KeyboardInterrupt as err:
        code, message, error = EXIT_INTERRUPTED, "interrupted", err
    except BrokenPipeError:  # `bigtrain ... | head`: the reader left; nothing to say to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # no second error at exit
        return EXIT_BROKEN_PIPE
    except Exception as err:  # not a named error: the traceback is what finds the bug
        import traceback
        traceback.print_exception(err)
        print(f"bigtrain: unexpected {type(err).__name__}: {err} (not a named error: the "
              f"traceback above shows where{'' if verbose else '; -v adds the TFX and Beam logs'})",
              file=sys.stderr)
        return EXIT_FAILED
    if verbose:
        import traceback
        traceback.print_exception(error)
    print(f"bigtrain: {message}", file=sys.stderr)
    return code


def console_main() -> None:
    """The `bigtrain` console script: main(), then an exit that survives tensorflow-io's S3 client
    (components/storage/fs.py exit_process)."""
    code = main()
    from components.storage import fs
    fs.exit_process(code or 0)
    sys.exit(code)


if __name__ == "__main__":
    console_main()
