"""The `bigtrain` command line."""

from __future__ import annotations

import argparse
import json
import os
import sys

from components import config as config_lib
from components.common.errors import (EXIT_CONFIG, EXIT_FAILED, EXIT_INTERRUPTED, BigtrainError,
                                      HomeError)
from runners.logs import configure_logging


def _add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", default="tiny", choices=sorted(config_lib.PRESETS),
                        help="starting point of the config (default: tiny)")
    parser.add_argument("--config", metavar="FILE", help="YAML file applied over the preset")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="dotted override, e.g. --set train.learning_rate=3e-4 (repeatable)")
    parser.add_argument("--home", help="directory holding all run state (default ./bigtrain_home)")
    parser.add_argument("--runner", help="Beam runner for the data and validation stages, e.g. "
                                         "DirectRunner (default), FlinkRunner, SparkRunner, DataflowRunner")
    parser.add_argument("--beam-arg", dest="beam_args", action="append", default=[], metavar="ARG",
                        help="extra Beam pipeline option, e.g. "
                             "--beam-arg=--direct_running_mode=multi_processing (repeatable)")


def resolve_config(args: argparse.Namespace) -> config_lib.Config:
    overrides = list(args.overrides)
    if args.home:
        overrides.append(f"paths.home={args.home}")
    config = config_lib.build_config(args.preset, args.config, overrides)
    extra = ([f"--runner={args.runner}"] if args.runner else []) + list(args.beam_args)
    if extra:
        config = config_lib.merge(config, {"runtime": {
            "beam_args": list(config.runtime.beam_args) + extra}})
    return config


def cmd_config(args: argparse.Namespace) -> int:
    import yaml
    config = resolve_config(args)
    yaml.safe_dump(config_lib.to_dict(config), sys.stdout, sort_keys=False)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from runners.local import run_command
    return run_command(resolve_config(args), verbose=args.verbose, force=args.force,
                       until=args.until)


def cmd_generate(args: argparse.Namespace) -> int:
    from components.push.push import served_versions
    base = os.path.join(os.path.abspath(args.home or config_lib.PathsConfig().home), "serving", args.model)
    versions = served_versions(base)
    if not versions:
        print(f"bigtrain generate: no pushed model under {base} (run `bigtrain run` first; only "
              f"blessed models are pushed)", file=sys.stderr)
        return EXIT_FAILED
    version = args.version if args.version is not None else versions[-1]
    if version not in versions:
        print(f"bigtrain generate: version {version} not in {base} (have {versions})", file=sys.stderr)
        return EXIT_FAILED
    configure_logging(False)
    import tensorflow as tf
    path = os.path.join(base, str(version))
    model = tf.saved_model.load(path)
    try:  # the signatures take a batch of prompts; bad values are InvalidArgument from the graph
        if args.temperature != 0:  # a negative temperature is the signature's error
            out = model.signatures["sample"](
                prompt=tf.constant([args.prompt]), max_new_tokens=tf.constant([args.max_new_tokens]),
                temperature=tf.constant([args.temperature], tf.float32), seed=tf.constant([args.seed]),
                top_k=tf.constant([0]), top_p=tf.constant([1.0]), stop=tf.zeros([1, 0], tf.string))
        else:
            out = model.signatures["generate"](prompt=tf.constant([args.prompt]),
                                               max_new_tokens=tf.constant([args.max_new_tokens]))
    except tf.errors.InvalidArgumentError as err:
        import re
        found = re.search(r"assertion failed: \[([^\]]*)\]", err.message)  # the signature's own words
        print(f"bigtrain generate: {found.group(1).strip() if found else err.message.splitlines()[0]}",
              file=sys.stderr)
        return EXIT_FAILED
    print(f"[{path}]", file=sys.stderr)
    print(args.prompt + out["text"].numpy()[0].decode("utf-8", errors="replace"))
    return 0


def cmd_train_worker(args: argparse.Namespace) -> int:
    config = resolve_config(args)
    configure_logging(args.verbose)
    from components.training.worker import train_worker
    summary = train_worker(config, args.examples, args.out, args.weights_out)
    print(json.dumps(summary))
    return 0


def cmd_compile(args: argparse.Namespace) -> int:
    config = resolve_config(args)
    configure_logging(False)
    if args.target == "kubeflow":
        from runners.kubeflow import compile_kubeflow
        path = compile_kubeflow(config, args.out)
        print(f"KFP v2 pipeline spec: {path} (image {config.orchestrator.image}, pipeline root "
              f"{config.orchestrator.pipeline_root})")
    else:
        from runners.airflow import write_dag_file
        path = write_dag_file(config, args.out)
        print(f"Airflow DAG file: {path} (copy it into your dags folder)")
    return 0


def cmd_lineage(args: argparse.Namespace) -> int:
    from pipeline.lineage import queries, render
    from pipeline.lineage.store import Lineage, connect
    from runners.lock import live_writer
    home = os.path.abspath(args.home or config_lib.PathsConfig().home)
    if not (args.metadata or args.mysql_host) and not os.path.isdir(home):
        raise HomeError(f"home {home} does not exist (pass --home, or run `bigtrain run` first)")
    store = connect(args.metadata or os.path.join(home, "metadata.sqlite"),
                    mysql_host=args.mysql_host, mysql_port=args.mysql_port,
                    mysql_database=args.mysql_database, mysql_user=args.mysql_user,
                    mysql_password=args.mysql_password or os.environ.get("BIGTRAIN_MYSQL_PASSWORD"))
    # Never waits on a run: reads the lock file's record, takes no lock (runners/lock.py).
    lin = Lineage(store, live_writer=live_writer(home) if os.path.isdir(home) else None)
    what = args.lineage_command
    if what == "runs":
        result, text = queries.list_runs(lin), render.runs_text
    elif what == "trace":
        result, text = queries.trace(lin, args.target, down=args.down), render.trace_text
    elif what == "diff":
        result, text = queries.diff(lin, args.run_a, args.run_b), render.diff_text
    elif what == "why":
        result, text = queries.why(lin, args.run), render.why_text
    else:  # graph
        result = queries.graph(lin, args.run)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            written = {}
            for ext, make in (("dot", render.to_dot), ("mmd", render.to_mermaid), ("svg", render.to_svg)):
                written[ext] = os.path.join(args.out, f"graph.{ext}")
                with open(written[ext], "w", encoding="utf-8") as fh:
                    fh.write(make(result))
            written["png"] = os.path.join(args.out, "graph.png")
            render.to_png(result, written["png"])
            result = dict(result, files=written)
            text = lambda r: "\n".join(f"{k}: {v}" for k, v in r["files"].items())
        else:
            text = {"dot": render.to_dot, "mermaid": render.to_mermaid, "svg": render.to_svg}[args.format]
    print(json.dumps(result, indent=2, default=str) if args.json else text(result))
    return 0


def _add_store_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", help="run state directory (default ./bigtrain_home); the "
                                       "database is <home>/metadata.sqlite")
    parser.add_argument("--metadata", metavar="SQLITE", help="an MLMD sqlite file instead of --home's")
    parser.add_argument("--mysql-host", help="MLMD in MySQL (shared deployments) instead of sqlite")
    parser.add_argument("--mysql-port", type=int, default=3306)
    parser.add_argument("--mysql-database", default="metadb")
    parser.add_argument("--mysql-user", default="root")
    parser.add_argument("--mysql-password", default=None,
                        help="default: $BIGTRAIN_MYSQL_PASSWORD")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bigtrain", description="Train large TensorFlow models with a validated, "
                                     "lineage-tracked TFX pipeline.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = sub.add_parser("run", help="run the whole pipeline locally (data, validation, training, "
                                     "evaluation, push) and print the run report",
                         description="Run the pipeline with LocalDagRunner and Beam's DirectRunner; "
                                     "state under --home (one run at a time per home). When "
                                     "nothing changed since the last complete run, print its "
                                     "report instead. Exit codes: 1 a stage failed, 2 bad config, "
                                     "3 validation gate, 4 home in use, 5 metadata store, "
                                     "6 home not usable, 7 disk full.")
    _add_config_args(run)
    run.add_argument("-v", "--verbose", action="store_true",
                     help="show TFX and Beam logs (and tracebacks of errors)")
    run.add_argument("--force", action="store_true",
                     help="run the pipeline even when up to date (TFX's per-stage cache still applies)")
    run.add_argument("--until", metavar="STAGE", help="stop after this stage (a name from the run "
                                                      "report, e.g. TextExampleGen or AnomaliesGate)")
    run.set_defaults(func=cmd_run)

    gen = sub.add_parser("generate", help="generate text with the newest pushed model",
                         description="Load the newest (or --version) pushed SavedModel from "
                                     "<home>/serving/<model>/ and continue PROMPT.")
    gen.add_argument("prompt", help="text to continue")
    gen.add_argument("--home", help="run state directory (default ./bigtrain_home)")
    gen.add_argument("--model", default=config_lib.ModelConfig().name, help="model name (default gpt)")
    gen.add_argument("--version", type=int, help="served version (default: the newest)")
    gen.add_argument("--max-new-tokens", type=int, default=200, help="bytes to generate (default 200)")
    gen.add_argument("--temperature", type=float, default=0.8,
                     help="sampling temperature; 0 = greedy (default 0.8)")
    gen.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    gen.set_defaults(func=cmd_generate)

    worker = sub.add_parser(
        "train-worker", help="train outside the pipeline: one worker of a multi-worker job",
        description="Train on an Examples artifact's shards (DIR/Split-train/*) with the config's "
                    "strategy. For multi-worker training set runtime.strategy=multi_worker_mirrored "
                    "and start one process per worker, each with its TF_CONFIG; only the chief "
                    "writes OUT/serving_model.")
    _add_config_args(worker)
    worker.add_argument("--examples", required=True, metavar="DIR", help="Examples artifact folder")
    worker.add_argument("--out", required=True, metavar="DIR", help="output folder")
    worker.add_argument("--weights-out", metavar="FILE.npz", help="also save the final weights")
    worker.add_argument("-v", "--verbose", action="store_true")
    worker.set_defaults(func=cmd_train_worker)

    comp = sub.add_parser("compile", help="compile the pipeline for Kubeflow Pipelines or Airflow",
                          description="kubeflow: a KFP v2 pipeline spec (JSON) from TFX's "
                                      "KubeflowV2DagRunner. airflow: a DAG file for AirflowDagRunner "
                                      "with the resolved config embedded. Image, pipeline root, "
                                      "schedule etc. come from the orchestrator.* config keys.")
    comp.add_argument("target", choices=["kubeflow", "airflow"])
    _add_config_args(comp)
    comp.add_argument("--out", required=True, metavar="FILE", help="file to write")
    comp.set_defaults(func=cmd_compile)

    lineage = sub.add_parser("lineage", help="answer lineage questions from ML Metadata",
                             description="Runs, traces, diffs, graphs and failures, read from MLMD "
                                         "by ids and events. RUN is a run id, a unique prefix, "
                                         "'latest' or 'latest~N'.")
    lsub = lineage.add_subparsers(dest="lineage_command", metavar="QUESTION", required=True)
    p = lsub.add_parser("runs", help="pipeline runs, newest first, with per-stage states",
                        description="Pipeline runs, newest first: id, start, duration, state, "
                                    "per-stage state, pushed version.")
    _add_store_args(p)
    p = lsub.add_parser("trace", help="walk from a pushed model / artifact to its raw data",
                        description="TARGET: a pushed model directory, an artifact URI or id. Walks "
                                    "upstream (default) or downstream (--down).")
    p.add_argument("target")
    p.add_argument("--down", action="store_true", help="walk downstream (what was made from it)")
    _add_store_args(p)
    p = lsub.add_parser("diff", help="what changed between two runs",
                        description="Input fingerprints, config values, code digest, metrics, and "
                                    "which stages ran or were cached, for two runs.")
    p.add_argument("run_a")
    p.add_argument("run_b")
    _add_store_args(p)
    p = lsub.add_parser("graph", help="a run's artifact/execution graph (DOT, Mermaid, SVG, PNG)",
                        description="Print the graph (--format) or write graph.dot, graph.mmd, "
                                    "graph.svg and graph.png into --out DIR.")
    p.add_argument("run", nargs="?", default="latest")
    p.add_argument("--format", choices=["dot", "mermaid", "svg"], default="dot")
    p.add_argument("--out", metavar="DIR", help="write every format into DIR")
    _add_store_args(p)
    p = lsub.add_parser("why", help="why a run failed: stage, root cause, log, inputs",
                        description="For a failed run: the failed stage, the root-cause error, the "
                                    "log location and the stage's input artifacts.")
    p.add_argument("run", nargs="?", default="latest")
    _add_store_args(p)
    lineage.set_defaults(func=cmd_lineage)

    show = sub.add_parser("config", help="print the resolved config (preset + YAML + overrides)",
                          description="Print the resolved, validated config as YAML.")
    _add_config_args(show)
    show.set_defaults(func=cmd_config)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Dispatch; every named error is one line on stderr and its exit code (README: exit codes),
    with the traceback only under -v."""
    args = build_parser().parse_args(argv)
    verbose = getattr(args, "verbose", False)
    try:
        return args.func(args)
    except config_lib.ConfigError as err:
        code, message, error = EXIT_CONFIG, f"config error: {err}", err
    except BigtrainError as err:
        code, message, error = err.exit_code, str(err), err
    except LookupError as err:  # an unknown run or artifact named on the command line
        code, message, error = EXIT_FAILED, str(err.args[0] if err.args else err), err
    except KeyboardInterrupt as err:
        code, message, error = EXIT_INTERRUPTED, "interrupted", err
    if verbose:
        import traceback
        traceback.print_exception(error)
    print(f"bigtrain: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
