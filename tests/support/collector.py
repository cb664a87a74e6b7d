"""The cyclic garbage collector's thresholds in the suite's processes: pytest's (tests/conftest.py
pytest_configure) and, from their start, every Python process that inherits the suite's
PYTHONPATH (ledger_site/sitecustomize.py): xdist's workers, the fork servers, whose forks
(`bigtrain` runs, Airflow and KFP tasks, train-workers) inherit them, SDK workers, probes.

Why: with Python's defaults (700, 10, 10) a full collection runs whenever the objects that survived
the young generations reach a quarter of the old ones, and a TensorFlow/TFX process holds millions
(traced graphs, loaded SavedModels, protos): each automatic full pass took 0.1-0.9 s there. With
threshold2 at 100 a full pass waits for 100 middle-generation passes; the explicit ones (Keras'
Layer.__delattr__, pytest's unraisable-exception check at exit) run as before, and no object is
kept that a default collection would free, only freed later. Measured 2026-12-07, the AMD EPYC
2-core VM, one process each (`pytest -p` with gc.callbacks timing every pass):
tests/export/test_variants.py 7.1 CPU-s of collection (2,956 + 266 + 79 passes) in 58.9 CPU-s at
the defaults, 4.4 in 53.0 (85 + 2 + 63 passes) here; tests/training/test_gradients.py 6.0-6.4 in
43-55 (the VM's noise), 4.3 in 48-55. Peak RSS of the variants module 1.3 GB -> 2.0 GB: cyclic
garbage (dropped graphs and models) lives longer. `import tensorflow, keras, apache_beam,
tfx.components` in a fresh interpreter, three runs each: 6.7-7.7 user-s at the defaults, 5.6-6.6
here (a full pass each time the imported modules' objects grow by a quarter). The product keeps the
defaults: a large model dropped in a cycle would hold its weights that long."""

from __future__ import annotations

import gc

SUITE_THRESHOLDS = (20_000, 20, 100)


def use_suite_thresholds() -> None:
    gc.set_threshold(*SUITE_THRESHOLDS)
