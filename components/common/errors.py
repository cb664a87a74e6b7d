"""Named errors and the exit codes `bigtrain` returns for them (listed in
docs/operations.md#exit-codes-and-named-errors).

Each error's message names what is wrong (the file, the setting, the process) and what to do; the
CLI prints it on one line with no traceback unless -v. Only these (and ConfigError) are one-liners:
any other exception is a bug and keeps its traceback (runners/cli/app.py main)."""

from __future__ import annotations

import re

EXIT_OK = 0
EXIT_FAILED = 1       # a stage failed (details: `bigtrain lineage why`)
EXIT_CONFIG = 2       # bad config: unknown key, bad value, missing or malformed --config file
EXIT_GATE = 3         # the validation gate stopped the run before training (data anomalies)
EXIT_LOCKED = 4       # another run holds the home
EXIT_STORE = 5        # the metadata store is missing, corrupt, truncated, locked or unreachable
EXIT_HOME = 6         # the home is missing (reads), not a directory, or not writable
EXIT_DISK_FULL = 7    # no space left while writing shards, checkpoints or models
EXIT_OBJECT_STORE = 8  # an object store (s3://, gs://) is unreachable, or the bucket or credentials are wrong
EXIT_OUTPUT = 9       # an --out that would overwrite what bigtrain did not write, or land in its state
EXIT_TRACKER = 10     # tracking.required and a tracker (MLflow, W&B) that cannot be reached
EXIT_PREEMPTED = 75   # training stopped on SIGTERM/SIGINT after writing a checkpoint: run again
#                       to resume (75 is sysexits.h's EX_TEMPFAIL: "try again later")
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT) outside training, or a second one during training
EXIT_TERMINATED = 143  # SIGTERM outside training (a scheduler or `kill` stopping the run): 128 + 15
EXIT_BROKEN_PIPE = 141  # stdout's reader went away (`bigtrain lineage runs | head`): 128 + SIGPIPE,
#                         what a shell reports for a tool that signal ends; nothing is printed


class BigtrainError(Exception):
    """An error the user can act on: printed as `bigtrain: <message>`, exit `exit_code`."""
    exit_code = EXIT_FAILED


class NotFoundError(BigtrainError):
    """A run, artifact or execution named on the command line (or in a UI address) that the
    metadata store does not hold."""
    exit_code = EXIT_FAILED


class HomeLockedError(BigtrainError):
    exit_code = EXIT_LOCKED


class MetadataStoreError(BigtrainError):
    exit_code = EXIT_STORE


class HomeError(BigtrainError):
    exit_code = EXIT_HOME


class DiskFullError(BigtrainError):
    exit_code = EXIT_DISK_FULL


class ObjectStoreError(BigtrainError):
    """An s3:// or gs:// URI could not be reached: endpoint down, no bucket, bad credentials."""
    exit_code = EXIT_OBJECT_STORE


class NonFiniteError(BigtrainError):
    """A stage produced a NaN or infinite figure (a diverged loss): it fails naming the figure,
    and nothing non-finite reaches ML Metadata (components/common/figures.py)."""
    exit_code = EXIT_FAILED


class TrainingPreempted(BigtrainError):
    """SIGTERM or SIGINT reached training: the step in flight finished, a checkpoint with its
    input state was written, and the run stops so that the next one resumes exactly there."""
    exit_code = EXIT_PREEMPTED


class Terminated(KeyboardInterrupt):
    """SIGTERM outside training, raised in the main thread as Ctrl-C raises KeyboardInterrupt
    (runners/local/interrupts.py): a subclass of it, so that every library stops and cleans up the way
    it does for Ctrl-C instead of the process dying with its temp folders in place."""


class Interrupted(BigtrainError):
    """SIGINT or SIGTERM stopped a stage outside training: the stage's execution is recorded
    failed with this message, and the run exits 130 (SIGINT) or 143 (SIGTERM)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


class SdkWorkerError(BigtrainError):
    """A portable Beam run's SDK workers did not connect (or did not finish a one-element probe
    pipeline) within runtime.sdk_worker_timeout_s: the worker pool is down, or runs outside an
    environment with apache_beam; or a stage's worker made no progress for
    runtime.sdk_worker_stall_s (stuck in user code, stopped, out of memory)."""
    exit_code = EXIT_FAILED


# What Beam appends to a worker's error when it re-raises it: " [while running 'Step/Name']"
# (apache_beam.runners.common); the message a user reads is the error's own, without it.
BEAM_STEP_SUFFIX = re.compile(r"\s*\[while running '[^']*'\]")


def cause_chain(exc: BaseException | None, *, as_reported: bool = False):
    """exc, then its __cause__ (else __context__), and so on, each exception once: the errors a
    stage raised itself lie under the wrappers TFX and Beam raise around them. as_reported: stop
    where the chain was cut (`raise ... from None` sets __suppress_context__), as Python's own
    traceback does, so what a raiser chose to hide is never reported as the cause; kept off for
    classification (a disk-full OSError re-raised `from None` is still a full disk)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        if exc.__cause__ is not None or not (as_reported and exc.__suppress_context__):
            exc = exc.__cause__ or exc.__context__
        else:
            exc = None


def in_cause_chain(exc: BaseException | None, kind: type) -> BaseException | None:
    """The first exception of type `kind` in exc's cause chain, or None."""
    return next((e for e in cause_chain(exc) if isinstance(e, kind)), None)


class TrackingError(BigtrainError):
    """tracking.required is set and a tracker of tracking.backends cannot be reached (names it,
    its place and the cause); without tracking.required the same is a TrackerUnavailable
    warning and the run goes on (components/tracking/)."""
    exit_code = EXIT_TRACKER


class OutputError(BigtrainError):
    """An --out path bigtrain refuses to write: an existing file, a folder holding files it did not
    write (or its own earlier output without --force), or a place inside a home or serving folder."""
    exit_code = EXIT_OUTPUT
