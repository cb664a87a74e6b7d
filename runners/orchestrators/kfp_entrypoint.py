"""The container entrypoint of every Kubeflow step (the compiled spec's command):
`python -m runners.orchestrators.kfp_entrypoint --executor_class_path ... --json_serialized_invocation_args
{{$}} ...`. It does three things TFX's own entrypoint
(`tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor`) cannot, then hands over to
that entrypoint's `main` with the same arguments:

- registers tensorflow-io's s3:// filesystem before TFX's executors touch an artifact URI (TFX's
  StatisticsGen and ExampleValidator read and write through tf.io.gfile, which knows no s3://
  until `import tensorflow_io`);
- keeps a Beam stage on local workers from building TFX's sdist in the temp dir
  (runners/beam/staging.py);
- ends the process through fs.exit_process, so tensorflow-io's S3 client cannot turn a finished
  step into exit status 134 at interpreter exit (tensorflow/io#2039).

Around it, the step sends its OpenLineage START and COMPLETE / FAIL (runners/openlineage_emit.py,
from its ExecutorInput and ExecutorOutput; nothing when no transport is configured).
"""

from __future__ import annotations

import re
import sys
import traceback

from components.storage import fs
from runners.orchestrators.kubeflow import TASK_FLAG


def split_task(argv: list[str]) -> tuple[list[str], str | None]:
    """(argv without TASK_FLAG, its value or None; None too when a KFP backend before 2.4 left
    the placeholder unresolved: the task then comes from the output URIs, as before)."""
    rest, task, i = [], None, 0
    while i < len(argv):
        arg = argv[i]
        if arg == TASK_FLAG and i + 1 < len(argv):
            task, i = argv[i + 1], i + 2
            continue
        if arg.startswith(TASK_FLAG + "="):
            task = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    return rest, (None if task is None or task.startswith("{{") else task)


def main(argv: list[str]) -> None:
    from absl import app
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor as tfx_entrypoint

    from runners.beam.staging import skip_tfx_self_staging
    skip_tfx_self_staging()   # a step's Beam stage on local workers stages no TFX sdist
    argv, task = split_task(argv)
    fs.prepare(*re.findall(r"s3://[^\"\s,]+", " ".join(argv[1:])))
    lineage = StepLineage(argv, task)
    try:
        app.run(tfx_entrypoint.main, argv=argv, flags_parser=tfx_entrypoint._parse_flags)
    except SystemExit as done:  # absl's app.run always ends with sys.exit
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        lineage.end(None if code == 0 else f"SystemExit: exit status {code}")
        fs.exit_process(code)
        raise
    except BaseException as err:
        traceback.print_exc()
        lineage.end(f"{type(err).__name__}: {err}")
        fs.exit_process(1)
        raise


class StepLineage:
    """The step's OpenLineage events: START now, the end from `end` (error: what failed it)."""

    def __init__(self, argv: list[str], task: str | None = None):
        from runners.openlineage_emit import Emitter, kfp_events, now_ms
        self.emitter, self.started, self.task = Emitter(), now_ms(), task
        self.executor_input = executor_input(argv) if self.emitter.client is not None else None
        if self.executor_input is not None:
            self.emitter.emit(kfp_events(self.executor_input, "running", self.started, task=task))

    def end(self, error: str | None) -> None:
        from runners.orchestrators.kfp_local import merged_outputs
        from runners.openlineage_emit import kfp_events
        if self.executor_input is None:
            return
        outputs = merged_outputs(self.executor_input,
                                 self.executor_input.get("outputs", {}).get("outputFile", ""))
        self.emitter.emit(kfp_events(self.executor_input, "failed" if error else "complete",
                                     self.started, error, outputs, task=self.task))
        self.emitter.close()


def executor_input(argv: list[str]) -> dict | None:
    """The ExecutorInput JSON of --json_serialized_invocation_args (None: not there)."""
    import json
    for i, arg in enumerate(argv):
        if arg.startswith("--json_serialized_invocation_args"):
            text = arg.split("=", 1)[1] if "=" in arg else (argv[i + 1] if i + 1 < len(argv) else "")
            try:
                return json.loads(text)
            except ValueError:
                return None
    return None


if __name__ == "__main__":
    main(sys.argv)
