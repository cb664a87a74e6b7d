"""Loaded at start-up by every Python process that inherits the test suite's PYTHONPATH (the
ledger plugin, tests/support/ledger.py, prepends this folder): installs the ledger's event
counter (bigtrain_ledger_hook) when $BIGTRAIN_LEDGER_EVENTS is set, and nothing otherwise. Then
runs the sitecustomize this one shadows, if there is one further along sys.path."""

import os
import sys


def _chain() -> None:
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if os.environ.get("BIGTRAIN_LEDGER_EVENTS"):
    try:
        import bigtrain_ledger_hook
        bigtrain_ledger_hook.install()
    except Exception:  # a lost count, never a failed start-up
        pass
_chain()
