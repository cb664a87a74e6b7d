"""The test-cost ledger's event counter (tests/support/ledger.py): a tiny import hook that appends
one JSON line per expensive event to the file named by $BIGTRAIN_LEDGER_EVENTS:

- `tf_process`: this process imported tensorflow (the ledger drops the pytest processes' own);
- `pipeline_run`: one whole pipeline run: TFX's LocalDagRunner.run_with_ir (local and portable
  runs; LocalDagRunner.run goes through it), BeamDagRunner.run_with_ir, an Airflow DAG run
  created (DAG.create_dagrun: `airflow dags trigger`, `dag.test()`), a compiled KFP job run on
  this machine (runners.orchestrators.kfp_local.run_pipeline_job);
- `saved_model_export`: one SavedModel written: TF2's save_and_return_nodes (tf.saved_model.save
  and Keras' ExportArchive both end there, once each) or TF1's SavedModelBuilder.save.

Each line: {"event", "pid", "test", "group", "cmd"}: test = $PYTEST_CURRENT_TEST of the process
(inherited by children from the test that started them), group = $BIGTRAIN_LEDGER_GROUP where a
session-wide cache names its own group (tests.support.ledger.counted_as), cmd = the start of its
command line. Loaded in child processes by ledger_site/sitecustomize.py
(the ledger puts ledger_site/ on PYTHONPATH) and in the pytest processes by the ledger plugin.

Never changes behaviour: nothing is installed without $BIGTRAIN_LEDGER_EVENTS, a failure to
record is ignored (a count is lost, the program goes on), wrapped functions are called with the
same arguments and their results and exceptions pass through untouched. Imports only the
standard library (no TensorFlow: it hooks TensorFlow's modules as they load)."""

import functools
import json
import os
import sys
import types

EVENTS_VAR = "BIGTRAIN_LEDGER_EVENTS"
GROUP_VAR = "BIGTRAIN_LEDGER_GROUP"   # set by tests.support.ledger.counted_as (inherited by children)
EVENTS = ("pipeline_run", "saved_model_export", "tf_process")

# module -> [(attribute path, event)]: wrapped right after the module's own code has run, before
# any other module can copy the original out of it.
WRAP = {
    "tfx.orchestration.local.local_dag_runner": [("LocalDagRunner.run_with_ir", "pipeline_run")],
    "tfx.orchestration.beam.beam_dag_runner": [("BeamDagRunner.run_with_ir", "pipeline_run")],
    "airflow.models.dag": [("DAG.create_dagrun", "pipeline_run")],
    "runners.orchestrators.kfp_local": [("run_pipeline_job", "pipeline_run")],
    "tensorflow.python.saved_model.save": [("save_and_return_nodes", "saved_model_export")],
    "tensorflow.python.saved_model.builder_impl": [("_SavedModelBuilder.save", "saved_model_export")],
}
TF = "tensorflow"
_MARK = "_bigtrain_ledger"


def record(event: str) -> None:
    """Append {event, pid, test, group, cmd} to $BIGTRAIN_LEDGER_EVENTS (one write of one line, O_APPEND:
    lines of concurrent processes do not interleave). Without the variable: nothing."""
    path = os.environ.get(EVENTS_VAR)
    if not path:
        return
    try:
        line = json.dumps({"event": event, "pid": os.getpid(),
                           "test": os.environ.get("PYTEST_CURRENT_TEST"),
                           "group": os.environ.get(GROUP_VAR),
                           "cmd": " ".join(getattr(sys, "argv", []))[:160]}) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except Exception:  # a lost count, never a changed program
        pass


def counted(fn, event: str):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        record(event)
        return fn(*args, **kwargs)
    setattr(wrapper, _MARK, event)
    return wrapper


def _wrap(module) -> None:
    for dotted, event in WRAP.get(module.__name__, ()):
        try:
            *owner_path, name = dotted.split(".")
            owner = module
            for part in owner_path:
                owner = getattr(owner, part)
            original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
            if isinstance(original, types.FunctionType) and not getattr(original, _MARK, None):
                setattr(owner, name, counted(original, event))
        except Exception:  # a library version without it: nothing to count there
            pass


class _Finder:
    """A meta-path finder that finds nothing itself: for the few watched module names it asks
    the finders after it for the spec and hooks that module's loader, so that the module is
    counted or wrapped right after it executes. Any other name costs one set lookup."""
    _bigtrain_ledger = True
    watched = frozenset(WRAP) | {TF}

    def find_spec(self, name, path=None, target=None):
        if name not in self.watched:
            return None
        try:
            for finder in sys.meta_path:
                if finder is self or getattr(finder, _MARK, False):
                    continue
                find = getattr(finder, "find_spec", None)
                spec = find(name, path, target) if find else None
                if spec is not None:
                    _hook_loader(spec)
                    return spec
        except Exception:
            pass
        return None


def _hook_loader(spec) -> None:
    loader = spec.loader
    exec_module = getattr(loader, "exec_module", None)
    if exec_module is None or getattr(exec_module, _MARK, False):
        return

    def hooked_exec_module(module):
        exec_module(module)   # the module's own code; its exceptions propagate as they are
        try:
            if module.__name__ == TF:
                record("tf_process")
            _wrap(module)
        except Exception:
            pass
    hooked_exec_module._bigtrain_ledger = True
    try:
        loader.exec_module = hooked_exec_module   # this loader instance only (one per module)
    except Exception:
        pass


def install() -> bool:
    """Install the finder once per process, only where $BIGTRAIN_LEDGER_EVENTS is set; modules
    loaded before this are wrapped now (their callers so far keep the originals)."""
    if not os.environ.get(EVENTS_VAR):
        return False
    if not any(getattr(f, _MARK, False) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
        for name in WRAP:
            if name in sys.modules:
                _wrap(sys.modules[name])
    return True
