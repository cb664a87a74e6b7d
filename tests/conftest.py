"""Shared fixtures. TensorFlow + TFX cost ~30 s to import per process: pipeline runs are session
fixtures shared by many assertions, and everything that runs one is marked `slow`."""

import os
import shutil
import sysconfig

import pytest

# The test-cost ledger and its count guard (build/test-ledger.json, tests/suite_budget.json).
pytest_plugins = ["tests.support.ledger"]

STDLIB = sysconfig.get_paths()["stdlib"]
CPU_REPLICAS = 2
# Logical CPU devices: mirrored tests take the first CPU_REPLICAS; pipeline tests use up to 4.
LOGICAL_CPUS = 4
# The plain (never-compiled) step for every run a test trains that is not about XLA or the default
# run. Since 2026-12-07 runtime.xla=auto compiles the step on CPU too (components/training/loop.py
# AUTO_XLA): the default 1,000-step run gains, a test's few steps would pay the compile (tens of
# CPU-s each) and draw other dropout masks than the never-compiled pipeline-stage step. Set in
# tests/training/conftest.py TINY_OVERRIDES and tests/e2e/conftest.py PLAIN_STEP (base_args,
# SMALL_RUN, SENTENCEPIECE_RUN), and by the runs that build their own settings.
PLAIN_STEP = "runtime.xla=off"


def pytest_configure(config):
    """Split the CPU into 4 logical devices before TensorFlow initializes, so MirroredStrategy
    tests (and pipeline runs in this process) train with 2 real replicas (runtime.cpu_replicas
    takes the first 2) and pipeline-stage tests have up to 4 stage devices. And the collector's
    thresholds for a TensorFlow-sized heap (tests/support/collector.py)."""
    # The trackers' own variables (components/config/tracking.py ENVIRONMENT) from a developer's
    # shell would move every tracking test's store: the suite starts without them.
    from components.config.tracking import ENVIRONMENT
    for variable in ENVIRONMENT.values():
        os.environ.pop(variable, None)
    from tests.support.collector import use_suite_thresholds
    use_suite_thresholds()
    from components.training.strategy import ensure_cpu_replicas
    assert ensure_cpu_replicas(LOGICAL_CPUS) == LOGICAL_CPUS


@pytest.fixture(scope="session")
def bigtrain_server():
    """`bigtrain` processes that a test signals, kills or watches, and the multi-worker tests'
    train-workers (tests/training/conftest.py worker_server), as forks of one server per xdist
    worker that imported BIGTRAIN_IMPORTS (tests/support/fork_server.py): each is a process of
    its own, with its own environment, signals and exit, without the ~10 CPU-s of imports a
    fresh interpreter spends. `bigtrain_server.bigtrain(args, env, output=...)`. The ledger
    counts the server's one TensorFlow import in its own group whichever test starts it (the
    forks run in their caller's environment: their runs count in the caller's group)."""
    from tests.support.fork_server import BIGTRAIN_IMPORTS, SESSION_HANG_GUARD_S, ForkServer
    from tests.support.ledger import counted_as
    with counted_as("bigtrain-server"):
        server = ForkServer(dict(os.environ), BIGTRAIN_IMPORTS, hang_guard_s=SESSION_HANG_GUARD_S)
    with server:
        yield server


# Under pytest-xdist (`make test`, `make test-fast`: -n auto --dist loadgroup) the tests that share
# one of these expensive session fixtures run on one worker together, so the fixture is built
# once per session and not once per worker. A module with module-scoped fixtures runs on one
# worker (they are built once); the other tests of a module may run apart from its shared group.
SHARED_FIXTURE_GROUPS = {
    "chain": "e2e-pipeline-runs",      # tests/e2e/conftest.py: the chain of real pipeline runs
    "data_run": "e2e-pipeline-runs",
    "exported": "export-model",        # tests/export/conftest.py: the exported tiny model
    "loaded": "export-model",
    "pushed": "export-model",
    "sentencepiece_run": "sentencepiece-run",  # tests/e2e/conftest.py: one SentencePiece run
    "ui_home": "ui-store",             # tests/ui/conftest.py: the synthetic MLMD store
}


def _module(item) -> str:
    return item.nodeid.split("::", 1)[0]


def _uses_module_fixtures(item) -> bool:
    return any(defs[-1].scope in ("module", "class", "package")
               for defs in item._fixtureinfo.name2fixturedefs.values())


def xdist_groups(items) -> dict[str, str]:
    """{test id: its group}: the shared group of a fixture above that the test uses (for a module
    with module-scoped fixtures: that any of its tests uses), else the test's module."""
    def shared(item):
        return next((g for f, g in SHARED_FIXTURE_GROUPS.items() if f in item.fixturenames), None)

    whole = {}   # module with module-scoped fixtures -> its one group
    for item in items:
        if _uses_module_fixtures(item):
            whole.setdefault(_module(item), None)
    for item in items:
        if _module(item) in whole and shared(item):
            whole[_module(item)] = shared(item)
    return {item.nodeid: whole.get(_module(item)) or shared(item) or _module(item) for item in items}


# The longest groups, longest first (--durations of `make test` and `make test-fast` under xdist,
# 2026-11-23, docs/benchmarks.md#test-tiers). They start first; the rest follow in their
# collection order, slow-marked groups before fast ones.
LONGEST_GROUPS = [
    "e2e-pipeline-runs",
    "tests/runners/test_airflow.py",
    "tests/e2e/test_object_store_run.py",
    "tests/training/test_pipeline_stages.py",
    "tests/training/test_zero.py",
    "export-model",
    "tests/export/test_variants.py",
]


def run_order(items, group_of: dict[str, str]) -> list:
    """The items in the order they run: groups longest first (LONGEST_GROUPS), then slow-marked
    groups before fast ones, then in collection order; within a group, in collection order (the
    order of the command line; `pytest tests/` collects by path). For speed only, not for
    correctness: no e2e module reads another's runs (the chain's runs are all made before any
    test reads its home, tests/e2e/conftest.py chain), so any order passes. Until 2026-12-07 the
    e2e modules built on each other's runs in one home and this order sorted a group's modules by
    path to keep them working (a command line naming them in another order failed 9 of them on
    2026-11-28)."""
    first_seen, slow = {}, set()
    for index, item in enumerate(items):
        group = group_of[item.nodeid]
        first_seen.setdefault(group, index)
        if item.get_closest_marker("slow"):
            slow.add(group)

    def rank(item) -> tuple:
        group = group_of[item.nodeid]
        known = LONGEST_GROUPS.index(group) if group in LONGEST_GROUPS else len(LONGEST_GROUPS)
        return (known, group not in slow, first_seen[group])

    return sorted(items, key=rank)   # stable: a group's tests keep their collection order


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Group tests for xdist (above), then order them (run_order): loadgroup hands groups out in
    collection order (--no-loadscope-reorder), and a long group that starts last leaves the other
    workers idle at the end."""
    group_of = xdist_groups(items)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of[item.nodeid]))
    items[:] = run_order(items, group_of)


_EXIT_STATUS = [0]


def pytest_sessionfinish(session, exitstatus):
    _EXIT_STATUS[0] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """A session that touched s3:// exits without C++ static destructors (tensorflow-io's S3
    client aborts with status 134 otherwise: components/storage/fs.py exit_process)."""
    from components.storage import fs
    fs.exit_process(_EXIT_STATUS[0])


@pytest.fixture(autouse=True)
def _no_airflow_console_logging():
    """Importing Airflow in this process (a DAG built in-process: `bigtrain compile airflow`,
    runners/orchestrators/airflow.py) installs its RedirectStdHandler on the root logger, which writes every
    later INFO record to the *current* sys.stdout: a later test's captured output (a `lineage
    runs --json` parsed as JSON) then starts with an Airflow log line, depending on which worker
    ran what before. After each test the handler goes (the product's CLI runs in its own
    process, where Airflow is never imported for a lineage command)."""
    yield
    import logging
    for handler in list(logging.root.handlers):
        if type(handler).__module__.startswith("airflow."):
            logging.root.removeHandler(handler)


def make_corpus(root: str) -> dict[str, int]:
    """A small real-text corpus (two stdlib packages) plus one file of every quarantine kind.

    Returns {relative path: expected quarantine reason}."""
    for package in ("json", "email"):
        shutil.copytree(os.path.join(STDLIB, package), os.path.join(root, package),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    with open(os.path.join(root, "empty.txt"), "wb"):
        pass
    with open(os.path.join(root, "image.bin"), "wb") as fh:
        fh.write(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with open(os.path.join(root, "latin1.txt"), "wb") as fh:
        fh.write("caf\u00e9 cr\u00e8me\n".encode("latin-1"))
    os.symlink(os.path.join(root, "does-not-exist"), os.path.join(root, "dangling.txt"))
    quarantined = {"image.bin": "binary", "latin1.txt": "not_utf8", "dangling.txt": "unreadable"}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            if os.path.isfile(path) and os.path.getsize(path) == 0:
                quarantined[os.path.relpath(path, root)] = "empty"
    return quarantined


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("corpus"))
    expected = make_corpus(root)
    return root, expected
