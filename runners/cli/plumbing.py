"""`bigtrain plumbing`: commands for scripts and schedulers (a multi-worker job's worker, a compiled
Kubeflow job run here task by task), not for everyday use."""

from __future__ import annotations

import argparse
import json

from runners.cli.options import beam_options, config_options, int32_in, resolve_config
from runners.local.logs import configure_logging


def cmd_plumbing_train_worker(args: argparse.Namespace) -> int:
    config = resolve_config(args)
    configure_logging(args.verbose)
    from components.training.worker import train_worker
    summary = train_worker(config, args.examples, args.out, args.weights_out)
    print(json.dumps(summary))
    return 0


def cmd_plumbing_ps_task(args: argparse.Namespace) -> int:
    configure_logging(args.verbose)
    from components.training.parameter_server import serve
    serve()   # returns only if the server stops
    return 0


def cmd_plumbing_run_kfp_spec(args: argparse.Namespace) -> int:
    import tempfile
    from runners.orchestrators import kfp_local
    job = kfp_local.load_pipeline_job(args.spec)
    workdir = args.workdir or tempfile.mkdtemp(prefix="bigtrain-kfp-")
    print(f"run root {kfp_local.run_root(job, args.run_id or '<run id>')}; task logs under {workdir}")

    def progress(result):
        print(f"{result.name:55s} {result.kind:20s} {result.seconds:7.1f} s", flush=True)

    kfp_local.run_pipeline_job(job, workdir, run_id=args.run_id, progress=progress)
    return 0


def cmd_plumbing_dask_manifest(args: argparse.Namespace) -> int:
    from runners.orchestrators.dask_manifest import manifest_yaml
    config = resolve_config(args)
    print(manifest_yaml(config.orchestrator.image, workers=args.workers, name=args.name,
                        claim=args.claim), end="")
    return 0


def add_plumbing(sub, common: list) -> None:
    plumbing = sub.add_parser("plumbing", parents=common,
                              help="commands for scripts and schedulers, not for everyday use",
                              description="Building blocks the pipeline and its deployments call.")
    psub = plumbing.add_subparsers(dest="plumbing_command", metavar="COMMAND", required=True)
    worker = psub.add_parser(
        "train-worker", parents=common + [config_options(), beam_options()],
        help="train outside the pipeline: one worker of a multi-worker job",
        description="Train on an Examples artifact's shards (DIR/Split-train/*) with the config's "
                    "strategy. For multi-worker training set runtime.strategy=multi_worker_mirrored "
                    "and start one process per worker, each with its TF_CONFIG; only the chief "
                    "writes OUT/serving_model.")
    worker.add_argument("--examples", required=True, metavar="DIR", help="Examples artifact folder")
    worker.add_argument("--out", required=True, metavar="DIR", help="output folder")
    worker.add_argument("--weights-out", metavar="FILE.npz", help="also save the final weights")
    worker.set_defaults(func=cmd_plumbing_train_worker)
    ps_task = psub.add_parser(
        "ps-task", parents=common,
        help="serve one ps or worker task of a runtime.strategy=parameter_server job",
        description="Start the tf.distribute.Server of this process's TF_CONFIG task (type ps: "
                    "holds variables; type worker: runs the steps the chief schedules) and serve "
                    "until killed. The chief runs `bigtrain plumbing train-worker` or `bigtrain "
                    "run` with runtime.strategy=parameter_server (docs/training.md).")
    ps_task.set_defaults(func=cmd_plumbing_ps_task)
    kfp = psub.add_parser(
        "run-kfp-spec", parents=common, help="run a compiled Kubeflow PipelineJob here, task by task",
        description="Run every task of a `bigtrain compile kubeflow` PipelineJob on this machine, one "
                    "process per task in DAG order, through the spec's own container command, with "
                    "the ExecutorInput the KFP v2 launcher builds (docs/scale-out.md). Resolver "
                    "tasks yield no artifact (no MLMD here). Object-store credentials come from the "
                    "environment.")
    kfp.add_argument("spec", metavar="FILE", help="the PipelineJob JSON")
    kfp.add_argument("--run-id", help="run id in output URIs (default: local-<random>)")
    kfp.add_argument("--workdir", metavar="DIR", help="task folders and logs (default: a temp folder)")
    kfp.set_defaults(func=cmd_plumbing_run_kfp_spec)
    dask = psub.add_parser(
        "dask-manifest", parents=common + [config_options()],
        help="print a Dask cluster for Kubernetes (dask-kubernetes DaskCluster YAML)",
        description="The DaskCluster (dask-kubernetes operator) that runs the data stage's Beam "
                    "DaskRunner: scheduler and workers in orchestrator.image, the pipeline volume "
                    "mounted (docs/scale-out.md). Apply with kubectl apply -f -.")
    dask.add_argument("--workers", type=int32_in(1, 10_000), default=2,
                      help="worker pods (default 2)")
    dask.add_argument("--name", default="bigtrain-data", help="the cluster's name")
    dask.add_argument("--claim", default="bigtrain",
                      help="the PersistentVolumeClaim mounted at /mnt/bigtrain (default bigtrain)")
    dask.set_defaults(func=cmd_plumbing_dask_manifest)
