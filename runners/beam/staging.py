"""What a Beam stage stages for its workers.

TFX's BaseBeamExecutor, given any Beam args and none of Beam's staging options, packs TFX itself for
remote workers: `tfx.utils.dependency_utils.build_ephemeral_package` copies the installed `tfx`
package into a fresh `tempfile.mkdtemp()` and builds an sdist there. Measured on the dev VM
(2026-11-28): 52 MB and 1.5 CPU-s (a `setup.py sdist` subprocess) for every Beam stage of every run,
and nothing ever removes it. A default `bigtrain run` has Beam args (runtime.beam_args), so each run
left 2 such folders (TextExampleGen, StatisticsGen; 3 with a trained tokenizer) in the system temp
dir, outside everything bigtrain owns: the test suite's 56 runs left 5.7 GB there.

Workers that run in bigtrain's own environment need none of it: the DirectRunner (in memory or
its multi-processing workers) and a portable runner (Flink, Spark, the embedded job server) whose
SDK harness is an EXTERNAL worker pool or LOOPBACK. For those, `skip_tfx_self_staging` leaves the
args as they are; any other runner (Dataflow, a portable runner with DOCKER or PROCESS workers)
still gets TFX's package, as before, unless the user passes their own `--extra_package`,
`--setup_file`, `--requirements_file` or `--sdk_container_image` (docs/scale-out.md).

Installed once per process by each entry point that runs executors: the local runner, the
Airflow DAG (every task process parses it) and the Kubeflow step entrypoint. The decision is made
per call, from that stage's own Beam args, so installing it twice or for a remote run is harmless.
"""

from __future__ import annotations

# Runner names as Beam resolves them (apache_beam.runners.runner.create_runner: case-insensitive,
# the "Runner" suffix optional, a dotted path ends in the class name).
_DIRECT = {"direct", "switchingdirect", "bundlebaseddirect"}
_PORTABLE = {"portable", "flink", "spark", "prism"}
# Portable environments whose SDK harness is not built from staged packages: EXTERNAL is a worker
# pool the user started (from bigtrain's venv, docs/scale-out.md), LOOPBACK is this very process.
_HARNESS_HERE = {"EXTERNAL", "LOOPBACK"}


def workers_share_this_environment(beam_args: list[str]) -> bool:
    """Whether a Beam run with these options runs its Python workers from this installation
    (so staging TFX for them is wasted work): the DirectRunner (also the default when --runner is
    absent), or a portable runner with an EXTERNAL or LOOPBACK environment."""
    from apache_beam.options.pipeline_options import (PipelineOptions, PortableOptions,
                                                      StandardOptions)
    options = PipelineOptions(list(beam_args))
    runner = options.view_as(StandardOptions).runner or "DirectRunner"
    name = str(runner).rsplit(".", 1)[-1].lower().removesuffix("runner")
    if name in _DIRECT:
        return True
    environment = (options.view_as(PortableOptions).environment_type or "").upper()
    return name in _PORTABLE and environment in _HARNESS_HERE


def skip_tfx_self_staging() -> None:
    """Make TFX's `make_beam_dependency_flags` (what BaseBeamExecutor calls) return a local run's
    Beam args unchanged instead of building its ephemeral package; other runs go through TFX's own
    function. Idempotent: a second call finds it installed."""
    from tfx.utils import dependency_utils
    tfx_flags = dependency_utils.make_beam_dependency_flags
    if getattr(tfx_flags, "bigtrain_skips_local", False):
        return

    def make_beam_dependency_flags(beam_pipeline_args: list[str]) -> list[str]:
        if workers_share_this_environment(beam_pipeline_args):
            return list(beam_pipeline_args)
        return tfx_flags(beam_pipeline_args)
    make_beam_dependency_flags.bigtrain_skips_local = True
    make_beam_dependency_flags.tfx_original = tfx_flags
    dependency_utils.make_beam_dependency_flags = make_beam_dependency_flags
