"""The options several `bigtrain` commands share, defined once, and the config they resolve to."""

from __future__ import annotations

import argparse

from components import config as config_lib
from runners.local import metadata as metadata_lib


HOME_HELP = ("directory holding all run state: artifacts, runs, served models and, by default, "
             "the metadata store (default: the config's paths.home, ./bigtrain_home)")
METADATA_HELP = ("ML Metadata store: a sqlite file or mysql://USER@HOST:PORT/DATABASE, password from "
                 "$BIGTRAIN_METADATA_PASSWORD (default: $BIGTRAIN_METADATA, else the config's "
                 "metadata section: <home>/metadata.sqlite)")


def global_options(in_subcommand: bool) -> argparse.ArgumentParser:
    """-v, --home and --metadata, defined once: accepted before the subcommand and after it (a
    subcommand's copy defaults to SUPPRESS, so it never overwrites a value given before)."""
    unset = argparse.SUPPRESS if in_subcommand else None
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("-v", "--verbose", action="store_true",
                         default=argparse.SUPPRESS if in_subcommand else False,
                         help="show TFX and Beam logs, and the traceback of an error")
    options.add_argument("--home", metavar="DIR", default=unset, help=HOME_HELP)
    options.add_argument("--metadata", metavar="URI", default=unset, help=METADATA_HELP)
    return options


def config_options(with_preset: bool = True) -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    if with_preset:  # lineage reads only paths and metadata: no preset to choose
        options.add_argument("--preset", default="tiny", choices=sorted(config_lib.PRESETS),
                             help="starting point of the config (default: tiny)")
    options.add_argument("--config", metavar="FILE", help="YAML file applied over the preset")
    options.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                         help="dotted override, e.g. --set train.learning_rate=3e-4 (repeatable)")
    return options


def beam_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--runner", help="Beam runner for the data and validation stages, e.g. "
                                          "DirectRunner (default), FlinkRunner, SparkRunner, DataflowRunner")
    options.add_argument("--beam-arg", dest="beam_args", action="append", default=[], metavar="ARG",
                         help="extra Beam pipeline option, e.g. "
                              "--beam-arg=--direct_running_mode=multi_processing (repeatable)")
    return options


def resolve_config(args: argparse.Namespace) -> config_lib.Config:
    """Preset, --config, --set, then --home, the Beam options and the metadata store (--metadata
    or $BIGTRAIN_METADATA, runners/local/metadata.py)."""
    overrides = list(getattr(args, "overrides", []))
    if args.home == "":   # it silently became ./bigtrain_home
        raise config_lib.ConfigError("--home: empty; name a folder (default ./bigtrain_home: "
                                     "leave --home out)")
    if args.home:
        overrides.append(f"paths.home={args.home}")
    config = config_lib.build_config(getattr(args, "preset", "tiny"), getattr(args, "config", None),
                                     overrides)
    extra = ([f"--runner={args.runner}"] if getattr(args, "runner", None) else []) + list(
        getattr(args, "beam_args", []))
    if extra:
        config = config_lib.merge(config, {"runtime": {
            "beam_args": list(config.runtime.beam_args) + extra}})
    return metadata_lib.with_metadata_uri(config, args.metadata)


def output_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--json", action="store_true", help="machine-readable output")
    return options


def int32_in(low: int, high: int):
    """An argparse type: a whole number in [low, high] (the signatures take int32), else a usage
    error naming the option (exit 2) instead of an overflow traceback from TensorFlow."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside [{low}, {high}]")
        return value
    return parse


def port_number(text: str) -> int:
    """--port: 0-65535 (argparse names the option in its usage error, exit 2)."""
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1-65535, or 0 for a free one)")
    return int(text)
