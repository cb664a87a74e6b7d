"""The `bigtrain` command line."""

from __future__ import annotations

import argparse
import os
import sys

from pipeline import config as config_lib

EXIT_CONFIG, EXIT_GATE, EXIT_FAILED = 2, 3, 1


def _add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", default="tiny", choices=sorted(config_lib.PRESETS),
                        help="starting point of the config (default: tiny)")
    parser.add_argument("--config", metavar="FILE", help="YAML file applied over the preset")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="dotted override, e.g. --set train.learning_rate=3e-4 (repeatable)")
    parser.add_argument("--home", help="directory holding all run state (default ./bigtrain_home)")
    parser.add_argument("--beam-arg", dest="beam_args", action="append", default=[], metavar="ARG",
                        help="extra Beam pipeline option, e.g. "
                             "--beam-arg=--direct_running_mode=multi_processing (repeatable)")


def resolve_config(args: argparse.Namespace) -> config_lib.Config:
    overrides = list(args.overrides)
    if args.home:
        overrides.append(f"paths.home={args.home}")
    config = config_lib.build_config(args.preset, args.config, overrides)
    if args.beam_args:
        config = config_lib._merge(config, {"runtime": {
            "beam_args": list(config.runtime.beam_args) + list(args.beam_args)}})
    return config


def _quiet_libraries(verbose: bool) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1" if verbose else "3")
    import logging
    import warnings
    if not verbose:
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=UserWarning)
    from absl import logging as absl_logging
    level = logging.INFO if verbose else logging.ERROR
    absl_logging.set_verbosity(absl_logging.INFO if verbose else absl_logging.ERROR)
    logging.getLogger().setLevel(level)
    for noisy in ("apache_beam", "tensorflow", "absl"):
        logging.getLogger(noisy).setLevel(level)
    # bigtrain's own progress lines (training steps, evaluation) always show.
    ours = logging.getLogger("bigtrain")
    if not ours.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
        ours.addHandler(handler)
    ours.setLevel(logging.INFO)
    ours.propagate = False


def cmd_config(args: argparse.Namespace) -> int:
    import yaml
    config = resolve_config(args)
    yaml.safe_dump(config_lib.to_dict(config), sys.stdout, sort_keys=False)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    config = resolve_config(args)
    _quiet_libraries(args.verbose)
    from components.validation_gate import AnomaliesGate, AnomaliesFoundError  # noqa: F401
    from pipeline import report as report_lib
    from runners.local import LocalPaths, run_local

    if config.runtime.strategy == "mirrored":
        # Before any TensorFlow op: on a machine without GPUs, split the CPU into logical devices.
        from components.training.strategy import ensure_cpu_replicas
        ensure_cpu_replicas(config.runtime.cpu_replicas)
    paths = LocalPaths.for_home(config.paths.home, config.paths.pipeline_name)
    print(f"bigtrain run: preset {config.preset}, home {paths.home}", flush=True)
    failure = None
    try:
        _, run_dir = run_local(config)
        print(f"resolved config: {os.path.join(run_dir, 'config.yaml')}")
    except AnomaliesFoundError as err:
        failure = (EXIT_GATE, str(err))
    except Exception as err:  # reported below with the stage states, then exit non-zero
        failure = (EXIT_FAILED, f"{type(err).__name__}: {err}")
    if os.path.exists(paths.metadata_path):
        store = report_lib.open_store(paths.metadata_path)
        print(report_lib.format_report(report_lib.run_report(store, config.paths.pipeline_name)))
    if failure:
        print(f"\nrun FAILED: {failure[1]}", file=sys.stderr)
        return failure[0]
    print("\nrun COMPLETE")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from components.push import served_versions
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
    _quiet_libraries(False)
    import tensorflow as tf
    path = os.path.join(base, str(version))
    model = tf.saved_model.load(path)
    if args.temperature > 0:
        out = model.signatures["sample"](
            prompt=tf.constant(args.prompt), max_new_tokens=tf.constant(args.max_new_tokens),
            temperature=tf.constant(args.temperature, tf.float32), seed=tf.constant(args.seed))
    else:
        out = model.signatures["generate"](prompt=tf.constant(args.prompt),
                                           max_new_tokens=tf.constant(args.max_new_tokens))
    print(f"[{path}]", file=sys.stderr)
    print(args.prompt + out["text"].numpy().decode("utf-8", errors="replace"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bigtrain", description="Train large TensorFlow models with a validated, "
                                     "lineage-tracked TFX pipeline.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = sub.add_parser("run", help="run the whole pipeline locally (data, validation, training, "
                                     "evaluation, push) and print the run report",
                         description="Run the pipeline with LocalDagRunner and Beam's DirectRunner; "
                                     "state under --home. Exit 3 when the validation gate stops "
                                     "the run, 2 for a bad config, 1 for any other failure.")
    _add_config_args(run)
    run.add_argument("-v", "--verbose", action="store_true", help="show TFX and Beam logs")
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

    show = sub.add_parser("config", help="print the resolved config (preset + YAML + overrides)",
                          description="Print the resolved, validated config as YAML.")
    _add_config_args(show)
    show.set_defaults(func=cmd_config)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except config_lib.ConfigError as err:
        print(f"bigtrain: config error: {err}", file=sys.stderr)
        return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
