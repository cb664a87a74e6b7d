"""Loaded at start-up by every Python process that inherits the test suite's PYTHONPATH (the
ledger plugin, tests/support/ledger.py, prepends this folder): sets the suite's collector
thresholds (tests/support/collector.py: an import of TensorFlow, Keras, Beam and TFX spends ~14%
less CPU), and installs the ledger's event counter (bigtrain_ledger_hook) when
$BIGTRAIN_LEDGER_EVENTS is set. Then runs the sitecustomize this one shadows, if there is one
further along sys.path."""

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


def _collector() -> None:
    """collector.py loaded by its path: the repository root need not be on this sys.path."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "collector.py")
    spec = importlib.util.spec_from_file_location("bigtrain_suite_collector", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.use_suite_thresholds()


_collector()
if os.environ.get("BIGTRAIN_LEDGER_EVENTS"):
    try:
        import bigtrain_ledger_hook
        bigtrain_ledger_hook.install()
    except Exception:  # a lost count, never a failed start-up
        pass
_chain()
