"""A full disk during `bigtrain run` (exit 7): recognising it through the wrappers TF, Beam and TFX
raise around ENOSPC, recording the failure in MLMD once the failed stage's partial outputs have
freed their space (or saying on the console that the store could not be written), and the named
error the run ends with."""

from __future__ import annotations

import errno
import re
import sys

from components.common.errors import BEAM_STEP_SUFFIX, DiskFullError, cause_chain, in_cause_chain

# ENOSPC's text, and sqlite's SQLITE_FULL as MLMD words it ("Error when executing query:
# database or disk is full")
_FULL_TEXTS = ("No space left on device", "database or disk is full")


def is_disk_full(exc: BaseException | None) -> bool:
    return any((isinstance(e, OSError) and e.errno == errno.ENOSPC) or isinstance(e, DiskFullError)
               or any(text in str(e) for text in _FULL_TEXTS) for e in cause_chain(exc))


def named_disk_full(exc: BaseException) -> DiskFullError | None:
    """The DiskFullError a stage raised itself (it names where it was writing), if any: in the
    chain, or in the text of the RuntimeError a Beam worker's error is re-raised as."""
    named = in_cause_chain(exc, DiskFullError)
    found = None if named is not None else next(
        (m for m in (re.search(r"DiskFullError: ([^\n]*)", str(e)) for e in cause_chain(exc)) if m),
        None)
    text = str(named) if named is not None else found.group(1) if found else None
    return None if text is None else DiskFullError(BEAM_STEP_SUFFIX.sub("", text))


def record_or_say(record, error: BaseException | None, store_name: str) -> BaseException | None:
    """Call record() (the run's outcome into MLMD). When it fails on a full disk, say on the
    console that the store could not be written, and return the error the run ends with (the
    run's own, or this one when the pipeline itself had finished); any other failure raises."""
    try:
        record()
        return error
    except Exception as err:  # re-raised below unless the disk is full
        if not is_disk_full(err):
            raise
        print(f"bigtrain: note: this run's outcome could not be recorded in the metadata store "
              f"{store_name} ({_short(err)}): `bigtrain lineage` shows its last stage as running, "
              f"and the next run records it as abandoned", file=sys.stderr, flush=True)
        return error if error is not None else err


def _short(err: BaseException) -> str:
    text = str(err)
    return next((t for t in _FULL_TEXTS if t in text), text.splitlines()[0] if text else repr(err))


def disk_full_error(error: BaseException, home: str, stage_failure: str,
                    pruned: int) -> DiskFullError:
    """The named error of a run a full disk stopped: the stage's own words when it named where it
    was writing (the data stage: its output folder; the push: the serving folder), else the
    home; what was removed; what to do."""
    named = named_disk_full(error)
    if named is not None:
        return DiskFullError(f"{named}; {pruned} partial checkpoint file(s) pruned")
    return DiskFullError(
        f"no space left on device while writing under {home} ({stage_failure}); the failed "
        f"stage's partial outputs were removed (TFX) and {pruned} partial checkpoint file(s) "
        f"pruned; earlier artifacts, checkpoints and pushed models are intact. Free space and run "
        f"again (training resumes from its last complete checkpoint)")


def home_full_error(error: BaseException, home: str) -> DiskFullError | None:
    """The named error of a run the full disk stopped before any stage ran (the home's probe,
    the lock's record, the run's folder, the store), None for any other error or one named
    already (DiskFullError)."""
    if isinstance(error, DiskFullError) or not is_disk_full(error):
        return None
    return DiskFullError(
        f"no space left on device in the home {home} ({_short(error)}) before any stage ran; "
        f"nothing was run and nothing of this run is left there. Free space and run again")
