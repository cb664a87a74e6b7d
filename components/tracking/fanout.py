"""The fan-out over the trackers of tracking.backends (the package docstring tells the stream and
the phases): each call to every live tracker; one that raises is dropped with a TrackerUnavailable
warning, or with tracking.required raises TrackingError."""

from __future__ import annotations

import logging
import warnings
from typing import Protocol

from components.common.errors import TrackingError
from components.tracking import EXTERNAL

LOGGER = logging.getLogger("bigtrain.tracking")


class TrackerUnavailable(UserWarning):
    """A tracker of tracking.backends could not be reached; the run goes on without it."""


class Tracker(Protocol):
    name: str      # the backend's name in tracking.backends
    where: str     # its place, for messages: a URI or a folder
    run_id: str    # the tracker's own run id, once started

    def start(self, params: dict | None, tags: dict) -> str:
        """Create or resume this bigtrain run's tracker run; returns its id."""

    def log_step(self, step: int, figures: dict) -> None: ...

    def log_final(self, figures: dict, tags: dict) -> None: ...

    def copy_folder(self, name: str, folder: str) -> None:
        """Copy every file under a local folder into the tracker run, under `name`."""

    def finish(self, status: str | None) -> None:
        """End this phase; status FINISHED / FAILED ends the tracker run (None: it stays open)."""


def make_tracker(name: str, settings: dict, identity: dict) -> Tracker:
    if name == "mlflow":
        from components.tracking.mlflow_tracker import MlflowTracker
        return MlflowTracker(settings, identity)
    from components.tracking.wandb_tracker import WandbTracker
    return WandbTracker(settings, identity)


class Trackers:
    """The fan-out: each call goes to every live tracker; one that raises is dropped (a
    TrackerUnavailable warning) or, with `required`, raises TrackingError."""

    def __init__(self, trackers: list, required: bool = False, tensorboard: bool = True):
        self.live, self.required, self.tensorboard = list(trackers), required, tensorboard
        self.lost: dict[str, str] = {}   # backend -> why it was dropped

    @classmethod
    def from_settings(cls, settings: dict | None, identity: dict) -> "Trackers":
        """settings: components/config/tracking.py resolved(); None: TensorBoard only."""
        if not settings:
            return cls([])
        names = [n for n in settings["backends"] if n in EXTERNAL]
        return cls([make_tracker(n, settings, identity) for n in names],
                   required=settings["required"], tensorboard="tensorboard" in settings["backends"])

    def __bool__(self) -> bool:
        return bool(self.live)

    def _each(self, method: str, *args) -> None:
        for tracker in list(self.live):
            try:
                getattr(tracker, method)(*args)
            except Exception as err:  # noqa: BLE001 - any client failure means unreachable
                self._drop(tracker, method, err)

    def _drop(self, tracker, method: str, err: Exception) -> None:
        message = (f"tracking.backends: {tracker.name} at {tracker.where} cannot be reached "
                   f"({method}: {type(err).__name__}: {_short(err)})")
        self.live.remove(tracker)
        if self.required:
            raise TrackingError(f"{message}; tracking.required is set, so the run stops "
                                f"(unset it to go on without this tracker)") from err
        self.lost[tracker.name] = message
        text = f"{message}; the run goes on without it (tracking.required=true makes this an error)"
        LOGGER.warning("TrackerUnavailable: %s", text)
        warnings.warn(text, TrackerUnavailable, stacklevel=3)

    def start(self, params: dict | None, tags: dict) -> None:
        self._each("start", params, tags)

    def log_step(self, step: int, figures: dict) -> None:
        self._each("log_step", step, figures)

    def log_final(self, figures: dict, tags: dict) -> None:
        self._each("log_final", figures, tags)

    def copy_folder(self, name: str, folder: str) -> None:
        self._each("copy_folder", name, folder)

    def finish(self, status: str | None = None) -> None:
        self._each("finish", status)

    def ids(self) -> dict[str, str]:
        """{backend: its run id} of the trackers still live."""
        return {t.name: t.run_id for t in self.live if t.run_id}


def _short(err: Exception, limit: int = 300) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[:limit] + "..."

