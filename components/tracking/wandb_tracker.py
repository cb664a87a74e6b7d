"""The Weights & Biases tracker: offline by default (tracking.wandb_mode), each phase one W&B run
of the same id (the bigtrain run id, '.' as '-'), written under
<wandb_dir>/wandb/offline-run-<time>-<id>-<phase> (PHASES: two phases in one second keep apart);
`wandb sync <folder>` uploads them later into that one run (the ids match: each phase resumes
it). Offline, nothing reaches the network; online, wandb.init is held to INIT_TIMEOUT_S. W&B's
cache, logs and staged artifact copies stay under the same folder (PLACES)."""

from __future__ import annotations

import contextlib
import os

from components.storage import fs
from components.tracking import PIPELINE_TAG, RUN_TAG

INIT_TIMEOUT_S = 30
# W&B's own places, which default to the user's ~/.cache/wandb (its service's logs) and
# ~/.local/share/wandb (an artifact's staged copies): kept under the tracker's folder, unless
# the environment sets them (the user's choice).
PLACES = {"WANDB_CACHE_DIR": "cache", "WANDB_DATA_DIR": "data", "WANDB_ARTIFACT_DIR": "artifacts"}
PHASES = ("1-start", "2-train", "3-final")   # identity["phase"]: its folder's suffix, in order
# The W&B artifact type of each output tracking.copy_artifacts may name.
ARTIFACT_TYPES = {"Model": "model", "PushedModel": "model", "ModelRun": "run",
                  "ModelEvaluation": "evaluation"}


def wandb_run_id(bigtrain_run_id: str) -> str:
    """The W&B run id of a bigtrain run (W&B ids take letters, digits, '-' and '_')."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in bigtrain_run_id)


class WandbTracker:
    name = "wandb"

    def __init__(self, settings: dict, identity: dict):
        self.where, self.mode = settings["wandb_dir"], settings["wandb_mode"]
        self.project, self.identity = settings["wandb_project"], identity
        self.run_id, self.run = wandb_run_id(identity["run_id"]), None
        self.names = {RUN_TAG: identity["run_id"], PIPELINE_TAG: identity.get("pipeline_name", "")}

    @contextlib.contextmanager
    def _places(self):
        """PLACES under this tracker's folder while W&B runs here (set for the call, restored
        after: one process may track runs of several homes)."""
        unset = [key for key in PLACES if key not in os.environ]
        os.environ.update({key: os.path.join(self.where, PLACES[key]) for key in unset})
        try:
            yield
        finally:
            for key in unset:
                os.environ.pop(key, None)

    def start(self, params: dict | None, tags: dict) -> str:
        with self._places():
            return self._start(params, tags)

    def _start(self, params: dict | None, tags: dict) -> str:
        import wandb
        fs.makedirs(self.where)
        self.names.update(tags)
        names = self.names
        self.run = wandb.init(
            project=self.project, dir=self.where, mode=self.mode, id=self.run_id,
            name=self.identity["run_id"], config=params or None,
            resume="allow" if self.mode == "online" else None,   # offline: a new file each phase
            tags=[f"{k}={v}"[:64] for k, v in names.items()],
            settings=wandb.Settings(silent=True, console="off", x_disable_stats=True,
                                    x_disable_machine_info=True, init_timeout=INIT_TIMEOUT_S,
                                    x_sync_dir_suffix=self.identity.get("phase", "")))
        self.run.config.update({"bigtrain": {k: str(v) for k, v in names.items()}},
                               allow_val_change=True)
        return self.run_id

    def log_step(self, step: int, figures: dict) -> None:
        self.run.log({k: float(v) for k, v in figures.items()}, step=step)

    def log_final(self, figures: dict, tags: dict) -> None:
        self.run.summary.update(figures)
        self.names.update(tags)
        self.run.config.update({"bigtrain": {k: str(v) for k, v in self.names.items()}},
                               allow_val_change=True)

    def copy_folder(self, name: str, folder: str) -> None:
        """Every file under the local `folder` as one W&B artifact <run id>-<name>, staged (copied)
        under this tracker's folder; offline, `wandb sync` uploads it with the run."""
        import wandb
        artifact = wandb.Artifact(f"{self.run_id}-{name}", type=ARTIFACT_TYPES.get(name, "dataset"))
        with self._places():
            artifact.add_dir(folder)
            self.run.log_artifact(artifact)

    def finish(self, status: str | None) -> None:
        with self._places():
            self._finish(status)

    def _finish(self, status: str | None) -> None:
        if self.run is not None:
            import wandb
            self.run.finish(exit_code=1 if status == "FAILED" else 0)
            self.run = None
            # wandb.init started a `wandb-core` service process that outlives run.finish until
            # the process exits: in a long-lived process (a notebook, an orchestrator's worker,
            # the test suite) it stays behind. Stop it unless another W&B run is still open.
            if wandb.run is None:
                wandb.teardown()
