"""Issue 57 (1): an error reaches the user in its raiser's words. `root_cause` followed
`__context__` past `raise ... from None`, so a JSONL reader's `ValueError ... not JSON` raised from
json's `JSONDecodeError` (itself raised from None over the scanner's `StopIteration(0)`) reached
the console, `lineage why` and MLMD as `StopIteration: 0`.

Each named error type of the product is raised the ways a stage raises it (`from None` over a
library error, from inside a generator, under Beam's own re-raise with the step name, under a
wrapper that chains it) and read back through the functions the console line and MLMD use, and
through `bigtrain lineage why` on a real MLMD store."""

import json

import pytest

from components.common import errors
from pipeline.lineage import record
from runners.cli import app as cli


def _named_types():
    """Every BigtrainError subclass (the product's named errors), plus the built-in types its
    readers raise with a message naming the file."""
    found, todo = [], [errors.BigtrainError]
    while todo:
        kind = todo.pop()
        found.append(kind)
        todo.extend(kind.__subclasses__())
    return sorted({k for k in found if k.__module__.startswith(("components", "runners",
                                                                "pipeline"))},
                  key=lambda k: k.__name__) + [ValueError, FileNotFoundError]


def _make(kind, message):
    return kind(message, 2) if kind is errors.Interrupted else kind(message)


def _from_none_over_json(kind, message):
    """Like the JSONL readers: json's JSONDecodeError (whose context is StopIteration) caught
    and replaced `from None`."""
    try:
        json.loads("{broken")
    except json.JSONDecodeError:
        raise _make(kind, message) from None


def _inside_generator(kind, message):
    def lines():
        for text in ("{}", "not json"):
            try:
                yield json.loads(text)
            except ValueError:
                raise _make(kind, message) from None
    list(lines())


def _under_beam(kind, message):
    """Beam's re-raise of a DoFn's error (apache_beam.runners.common DoFnRunner._reraise_augmented,
    a compiled method: its rule restated here, and run for real by the test below): the same type
    built again with the step name appended, raised while the original is handled."""
    try:
        _from_none_over_json(kind, message)
    except Exception as exn:
        try:
            new = type(exn)(exn.args[0] + " [while running 'ReadEvalSet']", *exn.args[1:])
        except Exception:
            new = RuntimeError(f"{type(exn).__name__}: {exn} [while running 'ReadEvalSet']")
        raise new.with_traceback(exn.__traceback__)


def _wrapped(kind, message):
    """A wrapper that chains the cause explicitly (TFX's launcher, our stage runners)."""
    try:
        _inside_generator(kind, message)
    except Exception as exn:
        raise RuntimeError("stage TextExampleGen failed") from exn


RAISERS = (_from_none_over_json, _inside_generator, _under_beam, _wrapped)


def _raised(raiser, kind, message) -> BaseException:
    with pytest.raises(BaseException) as info:
        raiser(kind, message)
    return info.value


@pytest.mark.parametrize("raiser", RAISERS, ids=lambda r: r.__name__.strip("_"))
@pytest.mark.parametrize("kind", _named_types(), ids=lambda k: k.__name__)
def test_each_named_error_keeps_its_type_and_message(kind, raiser):
    message = f"eval.sets[0] (jlbad): /data/bad.jsonl:3: not JSON ({kind.__name__})"
    name, text = record.error_message(_raised(raiser, kind, message))
    assert (name, text) == (kind.__name__, message)


def test_an_error_from_a_real_beam_pipeline_keeps_its_message():
    """A DoFn raising like a reader, through Beam's DirectRunner (its real re-raise)."""
    import apache_beam as beam
    message = "eval.sets[0] (jlbad): /data/bad.jsonl:3: not JSON"

    def read(line):
        return _from_none_over_json(ValueError, message)

    with pytest.raises(Exception) as info:
        with beam.Pipeline() as pipeline:
            _ = pipeline | beam.Create(["x"]) | "ReadEvalSet" >> beam.Map(read)
    assert record.error_message(info.value) == ("ValueError", message)


def test_a_chain_of_only_control_flow_reports_its_top():
    """Nothing but StopIteration: the top is reported (never an empty cause)."""
    error = _raised(lambda *_: next(iter(())), None, None)
    assert record.root_cause(error) is error


def test_classification_still_sees_an_error_hidden_from_the_report():
    """`raise DiskFullError(...) from None` over an OSError: reported as the DiskFullError, while
    the chain a classifier walks still holds the OSError (exit codes look there)."""
    try:
        try:
            raise OSError(28, "No space left on device")
        except OSError:
            raise errors.DiskFullError("disk full writing /home/x") from None
    except errors.DiskFullError as err:
        error = err
    assert record.root_cause(error) is error
    assert errors.in_cause_chain(error, OSError) is not None


@pytest.mark.parametrize("raiser", RAISERS, ids=lambda r: r.__name__.strip("_"))
def test_lineage_why_shows_the_message_recorded_for_a_failed_run(tmp_path, capsys, raiser):
    """record_run writes the error on the run's FAILED executions in a real MLMD store; `bigtrain
    lineage why` reads it back (the synthetic store's run-c: a FAILED Trainer, an abandoned
    ExampleValidator whose note stays its own)."""
    from benchmarks.support import lineage_store
    from benchmarks.support.mlmd import connect
    home = tmp_path / "home"
    lineage_store.build(str(home))
    store = connect(str(home / "metadata.sqlite"), read_only=False)
    message = "eval.sets[0] (jlbad): /data/bad.jsonl:3: not JSON"
    record.record_run(store, "run-c", str(home / "runs" / "run-c"), "log", "digest",
                      exc=_raised(raiser, ValueError, message))
    capsys.readouterr()
    assert cli.main(["lineage", "why", "run-c", "--home", str(home), "--json"]) == 0
    why = json.loads(capsys.readouterr().out)
    failed = [f for f in why["failed"] if f["error_type"] != "abandoned"]
    assert failed and {(f["error_type"], f["error"]) for f in failed} == {("ValueError", message)}
    assert cli.main(["lineage", "why", "run-c", "--home", str(home)]) == 0
    text = capsys.readouterr().out
    assert message in text and "StopIteration" not in text
