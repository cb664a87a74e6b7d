"""What a run that died (kill -9, power loss) left behind, swept by the next `bigtrain run` once it
holds the home's lock: the lock's note on the dead holder, its half-written checkpoints and push
staging removed, its executions still RUNNING in MLMD recorded abandoned and their empty output
folders removed. runners/local/run.py calls it before the up-to-date check."""

from __future__ import annotations

import datetime

from components.config import Config
from components.push.staging import remove_dead_staging
from components.storage import checkpoints, fs
from runners.local.home import LocalPaths


def clean_after_dead_holder(lock, paths: LocalPaths) -> None:
    """The lock's last holder died: say so, and remove what it left half-written."""
    print(f"note: {lock.stale_note()}", flush=True)
    pruned = checkpoints.prune_partial_checkpoints(checkpoints.root(paths.pipeline_root))
    pruned += remove_dead_staging(paths.serving_dir)
    if pruned:
        print(f"note: removed what it left half-written (never read): {', '.join(pruned)}", flush=True)


def mark_abandoned(store, config: Config, run_id: str, stale: dict | None) -> None:
    """We hold the lock: whatever is still RUNNING in the store was left by a dead process;
    recorded abandoned (pipeline/lineage/record.py), their empty output folders removed."""
    from pipeline.lineage import record
    note = (f"abandoned: left running by a process that died; recorded by run {run_id} at "
            f"{datetime.datetime.now().isoformat(timespec='seconds')}"
            + (f" (dead holder: pid {stale.get('pid')} on {stale.get('host')}, "
               f"started {stale.get('started')})" if stale else ""))
    left = record.mark_abandoned(store, config.paths.pipeline_name, note, stale)
    if left:
        removed = remove_empty_outputs(store, left)
        print(f"note: {len(left)} execution(s) left running by a dead process recorded as "
              f"abandoned (see `bigtrain lineage runs`)"
              + (f"; {removed} empty output folder(s) of theirs removed" if removed else ""),
              flush=True)


def remove_empty_outputs(store, executions) -> int:
    """The output folders of abandoned executions that hold no file: TFX makes them before the
    executor runs, so a Trainer killed -9 leaves Trainer/model/N and model_run/N empty. A folder
    with any file in it is kept for the user to look at. Returns how many were removed."""
    from ml_metadata.proto import metadata_store_pb2 as pb
    events = store.get_events_by_execution_ids([e.id for e in executions])
    artifacts = store.get_artifacts_by_id(sorted({ev.artifact_id for ev in events}))
    empty = [a.uri for a in artifacts if a.state == pb.Artifact.ABANDONED and a.uri
             and fs.isdir(a.uri) and next(fs.walk_files(a.uri), None) is None]
    for uri in empty:
        fs.rmtree(uri)
    return len(empty)
