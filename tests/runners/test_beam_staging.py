"""runners/beam/staging.py: a Beam stage whose workers run from this installation builds no TFX
sdist in the system temp dir; any other runner still gets TFX's own staging. TFX's package build
is replaced by a recorder here (the real one costs 1.5 CPU-s and 52 MB); the e2e chain checks
that a whole default run calls it zero times (tests/e2e/test_pipeline.py)."""

import pytest
from tfx.dsl.components.base import base_beam_executor
from tfx.utils import dependency_utils

from runners.beam import staging as beam_staging

# Hand-made from Beam's runner docs: which runs start their Python workers from this installation.
RUNS_HERE = [
    [],                                                      # no --runner: the DirectRunner
    ["--direct_running_mode=in_memory", "--direct_num_workers=1"],   # runtime.beam_args' default
    ["--runner=DirectRunner", "--direct_running_mode=multi_processing"],
    ["--runner=direct"],
    ["--runner=apache_beam.runners.direct.direct_runner.SwitchingDirectRunner"],
    ["--runner=BundleBasedDirectRunner"],
    ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=EXTERNAL",
     "--environment_config=localhost:50000"],                # docs/scale-out.md's portable run
    ["--runner=FlinkRunner", "--environment_type=LOOPBACK"],
    ["--runner=SparkRunner", "--environment_type=external", "--environment_config=host:5000"],
]
STAGES_TFX = [
    ["--runner=DataflowRunner", "--project=p", "--region=r", "--temp_location=gs://b/t"],
    ["--runner=PortableRunner", "--job_endpoint=localhost:8099"],   # Beam's default: DOCKER
    ["--runner=FlinkRunner", "--environment_type=DOCKER"],
    ["--runner=PortableRunner", "--environment_type=PROCESS",
     "--environment_config={\"command\": \"/opt/apache/beam/boot\"}"],
]


@pytest.fixture
def sdist_builds(monkeypatch):
    """Calls of TFX's package build (recorded, not run) under the wrapper bigtrain installs."""
    builds = []
    monkeypatch.setattr(dependency_utils, "build_ephemeral_package",
                        lambda: builds.append(1) or "/staged/tfx_ephemeral-1.16.0.tar.gz")
    monkeypatch.setattr(dependency_utils, "make_beam_dependency_flags",
                        dependency_utils.make_beam_dependency_flags)   # restored after the test
    beam_staging.skip_tfx_self_staging()
    return builds


class _BeamStage(base_beam_executor.BaseBeamExecutor):
    def Do(self, input_dict, output_dict, exec_properties):   # noqa: N802 (TFX's name)
        raise AssertionError("only constructed")


def executor_args(beam_args):
    """What TFX's BaseBeamExecutor keeps as its Beam args (minus TFX's telemetry labels)."""
    context = base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=list(beam_args))
    args = _BeamStage(context)._beam_pipeline_args
    labels = [i for i, arg in enumerate(args) if arg == "--labels"]   # each followed by its value
    return [arg for i, arg in enumerate(args) if i not in labels and i - 1 not in labels]


@pytest.mark.parametrize("beam_args", RUNS_HERE)
def test_a_run_on_workers_from_this_environment_stages_nothing(sdist_builds, beam_args):
    """Caught: the old code (no wrapper: TFX builds its sdist for every one of these), a runner
    name compared case-sensitively or with its dotted path, the default runner forgotten."""
    assert beam_staging.workers_share_this_environment(beam_args)
    assert executor_args(beam_args) == beam_args
    assert sdist_builds == []


@pytest.mark.parametrize("beam_args", STAGES_TFX)
def test_remote_workers_still_get_tfx_staged(sdist_builds, beam_args):
    """Caught: a wrapper that skips staging for every runner (a Dataflow or Docker worker would
    then start without TFX and fail on the first element)."""
    assert not beam_staging.workers_share_this_environment(beam_args)
    assert executor_args(beam_args) == [*beam_args, "--extra_package=/staged/tfx_ephemeral-1.16.0.tar.gz"]
    assert sdist_builds == [1]


def test_tfx_alone_builds_its_package_for_a_local_run(monkeypatch):
    """The bug this module fixes, on TFX's own function: without the wrapper, the default Beam
    args of a local run cost one sdist build per Beam stage."""
    builds = []
    monkeypatch.setattr(dependency_utils, "build_ephemeral_package",
                        lambda: builds.append(1) or "/staged/tfx_ephemeral-1.16.0.tar.gz")
    installed = dependency_utils.make_beam_dependency_flags   # a run in this process wraps it
    tfx_flags = getattr(installed, "tfx_original", installed)
    assert tfx_flags(["--direct_num_workers=1"])[-1] == "--extra_package=/staged/tfx_ephemeral-1.16.0.tar.gz"
    assert builds == [1]


def test_installing_twice_wraps_once(sdist_builds):
    beam_staging.skip_tfx_self_staging()
    installed = dependency_utils.make_beam_dependency_flags
    beam_staging.skip_tfx_self_staging()
    assert dependency_utils.make_beam_dependency_flags is installed
    assert executor_args(["--runner=DataflowRunner"])[-1].startswith("--extra_package=")
    assert sdist_builds == [1]
