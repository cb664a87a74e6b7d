"""The container entrypoint of every Kubeflow step (the compiled spec's command):
`python -m runners.kfp_entrypoint --executor_class_path ... --json_serialized_invocation_args
{{$}} ...`. It does two things TFX's own entrypoint
(`tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor`) cannot, then hands over to
that entrypoint's `main` with the same arguments:

- registers tensorflow-io's s3:// filesystem before TFX's executors touch an artifact URI (TFX's
  StatisticsGen and ExampleValidator read and write through tf.io.gfile, which knows no s3://
  until `import tensorflow_io`);
- ends the process through fs.exit_process, so tensorflow-io's S3 client cannot turn a finished
  step into exit status 134 at interpreter exit (tensorflow/io#2039).
"""

from __future__ import annotations

import re
import sys
import traceback

from components.common import fs


def main(argv: list[str]) -> None:
    from absl import app
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor as tfx_entrypoint

    fs.prepare(*re.findall(r"s3://[^\"\s,]+", " ".join(argv[1:])))
    try:
        app.run(tfx_entrypoint.main, argv=argv, flags_parser=tfx_entrypoint._parse_flags)
    except SystemExit as done:  # absl's app.run always ends with sys.exit
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        fs.exit_process(code)
        raise
    except BaseException:
        traceback.print_exc()
        fs.exit_process(1)
        raise


if __name__ == "__main__":
    main(sys.argv)
