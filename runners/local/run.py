"""Local runner: TFX LocalDagRunner + Beam DirectRunner, all run state under the run's home, MLMD
as runners/local/metadata.py chooses (config `metadata`, --metadata, $BIGTRAIN_METADATA). `run_command` is `bigtrain run`:
lock the home, record runs a dead process left behind (runners/local/abandoned.py), skip the
pipeline when up to date, run, record, report, and turn what went wrong into a named error with
its exit code."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import sys
from dataclasses import dataclass, field

from components import config as config_lib
from components.config import Config, save_config
from components.config.loading import CONFIG_FILE
from components.storage import checkpoints, fs
from components.common.errors import (EXIT_FAILED, EXIT_GATE, EXIT_OK, EXIT_PREEMPTED,
                                      ObjectStoreError, TrackingError, cause_chain,
                                      in_cause_chain)
from runners.local import metadata as metadata_lib
from runners.local.disk_full import disk_full_error, home_full_error, is_disk_full, record_or_say
from runners.local.home import LocalPaths, check_home
from runners.local.interrupts import interrupt_of, interrupted_error, terminate_raises
from runners.beam.sdk_workers import check_sdk_workers, probing_each_beam_stage


@dataclass(frozen=True)
class RunPlan:
    """What `bigtrain run` settled before the pipeline starts: the run's id and files, the input
    fingerprint (computed once, at the run's start), the up-to-date key it will record, why it
    runs, and the stage to stop after (None: the whole pipeline)."""
    run_id: str
    run_dir: str
    log_path: str
    input_fingerprint: str
    inputs_key: dict
    reasons: tuple[str, ...]
    until: str | None = None
    verbose: bool = False  # -v: the report lists every data counter (zeros too)
    beam_placement: list = field(default_factory=list)  # filled by run_local, for the record


def run_local(config: Config, paths: LocalPaths, plan: RunPlan) -> None:
    """Run the pipeline once (up to and including stage `plan.until`, when given) with run id =
    the run folder's name.

    Raises whatever the failing component raised (after TFX has recorded it in MLMD)."""
    from tfx.dsl.compiler import constants
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner
    from tfx.orchestration.portable import runtime_parameter_utils, tfx_runner

    from pipeline.pipeline import beam_stage_lines, create_pipeline
    from runners.beam.staging import skip_tfx_self_staging

    skip_tfx_self_staging()   # no TFX sdist per Beam stage in the system temp dir (runners/beam/staging.py)
    # TFX writes artifacts with tf.io.gfile: s3:// needs tensorflow-io's filesystem registered
    # in this process before the first stage (fs.prepare); Beam stages reach S3 by apache-beam[aws].
    fs.prepare(paths.pipeline_root, paths.serving_dir, *(s.input for s in config.data.mixture()))
    fs.makedirs(paths.pipeline_root)
    pipeline = create_pipeline(
        config,
        pipeline_root=paths.pipeline_root,
        serving_dir=paths.serving_dir,
        metadata_connection_config=metadata_lib.connection(config, read_only=False),
        beam_pipeline_args=list(config.runtime.beam_args), until=plan.until,
        input_fingerprint=plan.input_fingerprint)
    plan.beam_placement[:] = beam_stage_lines(pipeline, config.runtime.beam_direct_stages)
    # Our run id instead of LocalDagRunner's timestamp: the report then reads exactly this run.
    pipeline_ir = tfx_runner._make_pipeline_proto(pipeline)  # what LocalDagRunner.run does first
    runtime_parameter_utils.substitute_runtime_parameter(
        pipeline_ir, {constants.PIPELINE_RUN_ID_PARAMETER_NAME: os.path.basename(plan.run_dir)})
    with probing_each_beam_stage(list(config.runtime.beam_args), config.runtime.sdk_worker_timeout_s,
                                 config.runtime.sdk_worker_stall_s):
        LocalDagRunner().run_with_ir(pipeline_ir)


def check_places(paths: LocalPaths) -> None:
    """The home is a writable local folder; every bucket the run writes to answers (a missing
    bucket or no credentials: exit 8 now, naming the URI, not mid-run)."""
    check_home(paths.home)
    for remote in paths.remote():
        fs.check_bucket(remote)


def object_store_cause(error: BaseException, places: list[str]) -> ObjectStoreError | None:
    """The ObjectStoreError behind a stage failure, or None: one in its chain (or named in the
    text of a Beam wrapper), else, when one of the run's remote places no longer answers, that
    (TensorFlow's own S3 reads and writes in the Trainer fail as op errors naming no URI; one
    bounded request per place)."""
    import re
    for exc in cause_chain(error):
        if isinstance(exc, ObjectStoreError):
            return exc
        named = re.search(r"ObjectStoreError: ([^\n]*)", str(exc))
        if named:
            return ObjectStoreError(named.group(1).strip())
    for place in places:
        try:
            fs.check_bucket(place)
        except ObjectStoreError as err:
            return ObjectStoreError(f"the object store no longer answers: {err}")
    return None


def _print_report(store, run_id: str, all_counters: bool = False, **kwargs):
    """Prints the run's report and returns it (the trackers' final stream reads the same one).
    all_counters (-v): the data counters at 0 listed too, not folded into one line."""
    from pipeline.lineage import report as report_lib
    report = report_lib.run_report(store, run_id=run_id, **kwargs)
    print(report_lib.format_report(report, all_counters=all_counters), flush=True)
    return report


def _plan_places(config: Config) -> tuple[Config, LocalPaths]:
    """The run's config with home:<path> evaluation sets resolved (to examples:<URI>) and its
    places, each checked before the lock, the store or any stage: the home and serving dir, a
    train.init_from=hf:DIR (headers only, no TF), and every evaluation input (eval.sets,
    data.decontaminate.eval_files: resolved and opened, components/corpus/eval_inputs.py)."""
    from components.config.strategy_rules import refuse_in_pipeline
    from components.corpus.eval_inputs import check_eval_inputs
    from components.training.hf_source import check_init_from
    from runners.local.eval_homes import resolve_eval_homes
    refuse_in_pipeline(config)
    config = resolve_eval_homes(config)
    paths = LocalPaths.for_config(config)
    check_places(paths)
    check_init_from(config)
    check_eval_inputs(config)
    return config, paths


def run_command(config: Config, verbose: bool = False, force: bool = False,
                until: str | None = None) -> int:
    """`bigtrain run` (with `until`: that stage and its upstream only): returns the exit code;
    raises BigtrainError for named errors. A run refused before it wrote anything leaves the
    home as it found it: no lock file of its own, and a home it created removed."""
    from runners.local.home import remove_if_empty
    from runners.local.lock import HomeLock

    home, found = os.path.abspath(config.paths.home), os.path.isdir(config.paths.home)
    try:
        config, paths = _plan_places(config)
        run_id = datetime.datetime.now().strftime("%Y%m%dT%H%M%S.%f")
        run_dir, log_path = paths.run_dir(run_id), paths.run_log(run_id)
        with HomeLock(paths.home, {"run_id": run_id, "run_dir": run_dir, "log": log_path}) as lock:
            return _locked_run(config, paths, lock, RunPlan(
                run_id, run_dir, log_path, input_fingerprint="", inputs_key={}, reasons=(),
                until=until, verbose=verbose), force)
    except Exception as err:   # a full home before any stage ran: exit 7 too, naming it
        named = home_full_error(err, home)
        if named is None:
            raise
        raise named from err
    finally:
        if not found:
            remove_if_empty(home)


def _locked_run(config: Config, paths: LocalPaths, lock, plan: RunPlan, force: bool) -> int:
    """run_command once it holds the home's lock: open the store (a named error when it cannot),
    sweep what a dead run left, check up to date, then run (lock.keep(): the home is written)."""
    from components.storage.listing import fingerprint_input
    from pipeline.lineage.store import Lineage
    from pipeline.lineage.connection import open_store
    from runners.local.abandoned import clean_after_dead_holder, mark_abandoned
    from runners.local.home import remove_if_empty
    from runners.local.logs import configure_logging, remove_file_handlers
    from runners.local import uptodate
    if lock.stale:
        clean_after_dead_holder(lock, paths)
    store = (open_store(metadata_lib.connection(config, read_only=False))
             if metadata_lib.store_exists(config) else None)
    if store is not None:
        lock.keep()
        mark_abandoned(store, config, plan.run_id, lock.stale)
    # The input is listed and fingerprinted once per run (metadata only): the up-to-date key
    # and the data stages' cache key are this one value.
    fingerprint = fingerprint_input(config.data)
    key = uptodate.inputs_key(config, fingerprint)
    reasons = [f"partial run up to {plan.until} (--until)"] if plan.until else ["forced (--force)"]
    if store is not None and not force and not plan.until:
        last, reasons = uptodate.check(Lineage(store), config, key)
        if not reasons:
            print(f"bigtrain run: up to date (nothing the stages depend on changed since run "
                  f"{last.name}: config, input files, code); the pipeline was not started. "
                  f"The last report follows (--force runs it anyway).\n", flush=True)
            _print_report(store, last.name, all_counters=plan.verbose)
            print("\nrun UP TO DATE")
            return EXIT_OK
    elif store is None:
        reasons = ["first run in this home"]
    try:
        save_config(config, plan.run_dir)
    except OSError:   # a full disk: no half-written run folder left, nor an empty runs/
        fs.rmtree(plan.run_dir)
        remove_if_empty(paths.runs_dir)
        raise
    lock.keep()
    configure_logging(plan.verbose, plan.log_path)
    try:
        return _run_pipeline(config, paths, dataclasses.replace(
            plan, input_fingerprint=fingerprint, inputs_key=key, reasons=tuple(reasons)))
    finally:
        remove_file_handlers(plan.log_path)


def _run_pipeline(config: Config, paths: LocalPaths, plan: RunPlan) -> int:
    from pipeline.lineage import record
    from components.validation.anomalies import AnomaliesFoundError

    from components.training.strategy import cpu_devices_needed, ensure_cpu_replicas
    if cpu_devices_needed(config.runtime):
        # Before any TensorFlow op: on a machine without GPUs, split the CPU into logical devices.
        ensure_cpu_replicas(cpu_devices_needed(config.runtime))
    print(f"bigtrain run: preset {config.preset}, home {paths.home}, run {plan.run_id}\n"
          f"why it runs: {'; '.join(plan.reasons)}\n"
          f"resolved config: {os.path.join(plan.run_dir, CONFIG_FILE)}, log: {plan.log_path}"
          + "".join(f"\n{label}: {path}" for label, path in (("pipeline root", paths.pipeline_root),
                    ("serving folder", paths.serving_dir)) if not path.startswith(paths.home)),
          flush=True)
    # A portable run's SDK workers must answer before any stage waits on them (no silent hang).
    check_sdk_workers(list(config.runtime.beam_args), config.runtime.sdk_worker_timeout_s)
    emitter = _lineage_start(config, plan)
    from runners.local.tracking import start_tracking
    start_tracking(config, plan.run_id)   # tracking.required: an unreachable tracker stops here
    failure, error = None, None
    try:
        # Libraries parse sys.argv themselves (Beam's options, absl flags: `-v` is absl's
        # verbosity flag), so they must not see bigtrain's own command line.
        command_line, sys.argv = sys.argv, sys.argv[:1]
        try:
            with terminate_raises():   # SIGTERM unwinds like Ctrl-C (runners/local/interrupts.py)
                run_local(config, paths, plan)
        finally:
            sys.argv = command_line
    except AnomaliesFoundError as err:
        failure, error = (EXIT_GATE, str(err)), err
    except config_lib.ConfigError:  # e.g. --until naming no stage: nothing ran
        raise
    except KeyboardInterrupt as err:   # Ctrl-C or SIGTERM between or around the stages
        raise _record_interrupt(config, paths, plan, err, emitter) from None
    except Exception as err:  # recorded in MLMD, reported with the stage states, exit non-zero
        interrupt = interrupt_of(err)   # inside a stage: TFX or Beam wrapped the interrupt
        if interrupt is not None:
            raise _record_interrupt(config, paths, plan, interrupt, emitter) from None
        import logging
        logging.getLogger("bigtrain.run").debug("run failed", exc_info=True)  # into run.log
        name, message = record.error_message(err)
        failure, error = (EXIT_FAILED, f"{name}: {message}"), err
        if record.is_preempted(err):   # recorded `preempted`; the next run resumes it
            failure = (EXIT_PREEMPTED, message)
    if metadata_lib.store_exists(config):
        error = _record_outcome(config, plan, error, emitter)  # not None: the disk filled up
    if error is not None:
        _raise_named_failure(config, paths, failure, error)
    if failure and failure[0] == EXIT_PREEMPTED:
        print(f"\nrun PREEMPTED: {failure[1]}\n(`bigtrain run` with the same config resumes the "
              f"Trainer there; earlier stages come from the cache)", file=sys.stderr)
        return failure[0]
    if failure:
        print(f"\nrun FAILED: {failure[1]}\n(details: bigtrain lineage why --home {paths.home})",
              file=sys.stderr)
        return failure[0]
    print("\nrun COMPLETE" + (f" (stopped after {plan.until}, as asked by --until)"
                              if plan.until else ""))
    return EXIT_OK


def _record_interrupt(config: Config, paths: LocalPaths, plan: RunPlan, interrupt,
                      emitter=None) -> BaseException:
    """The named error (exit 130 / 143) of a run that Ctrl-C or SIGTERM stopped, after recording
    it: the stopped stage's execution failed with that message (not left running, which the
    next run would call abandoned), the run's log and folder on its context, the report."""
    from pipeline.lineage import record
    from pipeline.lineage.connection import open_store
    from pipeline.lineage.store import Lineage
    if not metadata_lib.store_exists(config):   # stopped before the pipeline reached MLMD
        return interrupted_error(interrupt, None, paths.home)
    store = open_store(metadata_lib.connection(config, read_only=False))
    stopped = record.fail_unfinished(store, plan.run_id)
    stage = Lineage(store).node_of.get(stopped[-1].id) if stopped else None
    error = interrupted_error(interrupt, stage, paths.home)
    _record_run(config, plan, error, emitter)
    return error


def _raise_named_failure(config: Config, paths: LocalPaths, failure: tuple[int, str] | None,
                         error: BaseException) -> None:
    """A stage failure that has its own exit code: a full disk (7), an object store that no
    longer answers (8) or a required tracker (10), raised as that named error; any other failure
    returns. failure None: the stages finished, recording the run's outcome failed."""
    failure = failure or (EXIT_FAILED, f"{type(error).__name__}: {error}")
    if is_disk_full(error):
        removed = checkpoints.prune_partial_checkpoints(checkpoints.root(paths.pipeline_root))
        raise disk_full_error(error, paths.home, failure[1], len(removed)) from error
    tracking = in_cause_chain(error, TrackingError)   # tracking.required, lost mid-training
    if tracking is not None:
        raise TrackingError(f"{tracking} (the Trainer stopped; its checkpoints are kept: run "
                            f"again to resume)") from error
    lost = object_store_cause(error, paths.remote() + (
        [s.input for s in config.data.mixture() if fs.is_remote(s.input)]))
    if lost:
        raise ObjectStoreError(
            f"{lost} (stage failure: {fs.short_message(failure[1])}; details: bigtrain lineage why "
            f"--home {paths.home})") from error


def _record_outcome(config: Config, plan: RunPlan, error: BaseException | None,
                    emitter) -> BaseException | None:
    """_record_run; after a full disk, first the stages TFX could not record (its own write
    failed while the partial outputs still held the space they free now) recorded failed. When
    the store cannot be written either, the console says so (runners/local/disk_full.py) and the run
    still ends with its named error. Returns the error the run ends with."""
    from pipeline.lineage import record
    from pipeline.lineage.connection import describe, open_store
    connection = metadata_lib.connection(config, read_only=False)

    def record_all():
        if is_disk_full(error):
            record.fail_unfinished(open_store(connection), plan.run_id)
        _record_run(config, plan, error, emitter)
    return record_or_say(record_all, error, describe(connection))


def _lineage_start(config: Config, plan: RunPlan):
    """The run's OpenLineage sender (sends nothing when no transport is configured), after it
    sent the parent run's START (runners/openlineage_emit.py)."""
    from pipeline.lineage import openlineage_events as ol
    from runners.openlineage_emit import Emitter, now_ms
    emitter = Emitter()
    emitter.emit([ol.pipeline_event(ol.RunRecord(plan.run_id, config.paths.pipeline_name,
                                                 config_lib.digest(config)),
                                    ol.RunState.START, now_ms())])
    return emitter


def _record_run(config: Config, plan: RunPlan, error: BaseException | None, emitter=None) -> None:
    """The run's context in MLMD (its outcome, why it ran, its up-to-date key when it
    succeeded), then its report, then the trackers' final figures (runners/local/tracking.py), then
    the run's OpenLineage events (emitter: its sender)."""
    from pipeline.lineage import record
    from pipeline.lineage.connection import open_store
    store = open_store(metadata_lib.connection(config, read_only=False))
    run = record.record_run(store, plan.run_id, plan.run_dir, plan.log_path,
                            config_lib.digest(config), error, inputs_key=None if error else
                            json.dumps(plan.inputs_key, sort_keys=True))
    report = None
    if run is not None:
        run.custom_properties[record.RUN_WHY].string_value = "; ".join(plan.reasons)
        if plan.until:  # a partial run says so in MLMD (and the report)
            run.custom_properties[record.UNTIL].string_value = plan.until
            print(f"partial run: stages up to {plan.until} (--until)")
        if plan.beam_placement:   # a Beam runner other than the DirectRunner: the report says where
            run.custom_properties[record.BEAM_PLACEMENT].string_value = json.dumps(plan.beam_placement)
        store.put_contexts([run])
        report = _print_report(store, plan.run_id, all_counters=plan.verbose)
    from runners.local.tracking import finish_tracking
    finish_tracking(config, store, run, error, report)
    if emitter is not None:
        from pipeline.lineage import openlineage_events as ol
        from runners.openlineage_emit import emit_local_run
        emit_local_run(emitter, store, ol.RunRecord(plan.run_id, config.paths.pipeline_name,
                                                    config_lib.digest(config)),
                       None if error is None else "{}: {}".format(*record.error_message(error)))
