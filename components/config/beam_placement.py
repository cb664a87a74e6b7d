"""Where each Beam stage runs: the run's runner (runtime.beam_args' --runner), or Beam's
DirectRunner for a stage that runtime.beam_direct_stages names (a stage the run's runner cannot
carry). Plain functions over argument lists: no Beam import.

Beam's DaskRunner (apache-beam[dask]) is not among the runner names Beam resolves by itself:
`--runner=DaskRunner` becomes its class path here (`resolved_args`), for every Beam stage. What
it carries, measured on Beam 2.72 (2026-12-07, tests/components/test_dask_runner.py): the data
stage (TextExampleGen: shards, quarantine and counters byte-identical to the DirectRunner's; its
counters are written beside its pieces, components/text_example_gen/unit_counts.py, since the
DaskRunner has no metrics) and TokenizerGen's sample read (the same sample and model bytes;
components/tokenizer/sample_pipeline.py). Not carried, so on the DirectRunner by default
(DIRECT_REASONS): StatisticsGen."""

from __future__ import annotations

from components.config import ConfigError

DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"
DIRECT_RUNNER = "DirectRunner"
# Short names Beam does not resolve itself -> the class path it imports.
RUNNER_PATHS = {"daskrunner": DASK_RUNNER, "dask": DASK_RUNNER}
# What tells Beam's DaskRunner where the scheduler is; without one it would start a private
# LocalCluster in the stage's own process, which no `make dask` or Kubernetes worker would see.
DASK_SCHEDULER_OPTIONS = ("--dask_client_address", "--dask_scheduler_file")

# Why each default entry of runtime.beam_direct_stages cannot run on a cluster runner (Beam's
# DaskRunner, 2.72, measured 2026-12-07). A stage a user adds gets DIRECT_SETTING as its reason.
DIRECT_REASONS = {
    "StatisticsGen": "TFDV's statistics fail on Beam's DaskRunner ('NoneType' object has no "
                     "attribute '__dask_keys__')",
}
DIRECT_SETTING = "runtime.beam_direct_stages names it"


def _runner_flag(args: list[str], i: int) -> tuple[str | None, int]:
    """(the runner named at args[i], how many items name it: 1 for --runner=X, 2 for --runner X),
    or (None, 1) when args[i] is not a --runner flag."""
    arg = args[i]
    if arg.startswith("--runner="):
        return arg.split("=", 1)[1], 1
    if arg == "--runner" and i + 1 < len(args):
        return args[i + 1], 2
    return None, 1


def runner_of(beam_args) -> str:
    """The runner the arguments name (the last --runner wins, as in Beam), DirectRunner if none,
    as its short class name (DaskRunner, FlinkRunner, ...)."""
    args, i, runner = list(beam_args), 0, DIRECT_RUNNER
    while i < len(args):
        named, width = _runner_flag(args, i)
        runner = named or runner
        i += width
    return RUNNER_PATHS.get(runner.lower(), runner).rsplit(".", 1)[-1]


def resolved_args(beam_args) -> list[str]:
    """The arguments with each runner name Beam cannot resolve (DaskRunner) as its class path,
    --runner X as --runner=X. A DaskRunner run that names no scheduler is a ConfigError here,
    before any stage runs."""
    args, out, i = list(beam_args), [], 0
    while i < len(args):
        named, width = _runner_flag(args, i)
        out.append(args[i] if named is None else
                   f"--runner={RUNNER_PATHS.get(named.lower(), named)}")
        i += width
    if runner_of(out) == "DaskRunner" and not any(
            arg.split("=", 1)[0] in DASK_SCHEDULER_OPTIONS for arg in out):
        raise ConfigError("runtime.beam_args: --runner DaskRunner needs its scheduler: add "
                          "--beam-arg=--dask_client_address=tcp://HOST:PORT (or "
                          "--dask_scheduler_file=FILE); `make dask` starts one on 127.0.0.1")
    return out


def scheduler_of(beam_args) -> str | None:
    """The Dask scheduler the arguments name (--dask_client_address or --dask_scheduler_file,
    as X=Y or X Y), None if none."""
    args = list(beam_args)
    for i, arg in enumerate(args):
        name, _, value = arg.partition("=")
        if name in DASK_SCHEDULER_OPTIONS:
            return value or (args[i + 1] if i + 1 < len(args) else None)
    return None


def is_local(runner: str) -> bool:
    """The DirectRunner family: stages already run here, no other placement to make."""
    return runner in (DIRECT_RUNNER, "BundleBasedDirectRunner", "SwitchingDirectRunner",
                      "FnApiRunner", "PrismRunner")


def placement(stage: str, beam_args, direct_stages) -> tuple[str, str]:
    """(the runner `stage` runs on, why), e.g. ("DaskRunner", "runtime.beam_args:
    tcp://10.0.0.5:8786") or ("DirectRunner", "TFDV's statistics fail on ...")."""
    runner = runner_of(beam_args)
    scheduler = scheduler_of(beam_args) if runner == "DaskRunner" else None
    # A stage of DIRECT_REASONS moves only off the runner those reasons are about (a portable
    # run keeps its StatisticsGen: tests/e2e/test_portable_run.py); any other named stage moves
    # off every runner but the local ones.
    if (is_local(runner) or stage not in tuple(direct_stages)
            or (stage in DIRECT_REASONS and runner != "DaskRunner")):
        return runner, "runtime.beam_args" + (f": {scheduler}" if scheduler else "")
    return DIRECT_RUNNER, DIRECT_REASONS.get(stage, DIRECT_SETTING)


def stage_args(stage: str, beam_args, direct_stages) -> list[str]:
    """The Beam arguments a stage adds to the run's (TFX appends them: the last --runner wins):
    --runner=DirectRunner for a stage placed there, else none."""
    runner, _ = placement(stage, beam_args, direct_stages)
    return [f"--runner={DIRECT_RUNNER}"] if runner != runner_of(beam_args) else []


def placement_lines(stages, beam_args, direct_stages) -> list[str]:
    """One line per Beam stage: `TextExampleGen: DaskRunner (runtime.beam_args: tcp://...)`."""
    return [f"{stage}: {runner} ({why})" for stage in stages
            for runner, why in [placement(stage, beam_args, direct_stages)]]
