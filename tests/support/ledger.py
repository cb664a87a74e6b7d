"""The test-cost ledger and its guard (docs/operations.md#test-tiers), a pytest plugin registered
by tests/conftest.py.

Ledger: per test (setup + call + teardown), wall seconds and CPU seconds (user + sys of the test's
own process, RUSAGE_SELF, plus the children it reaped, RUSAGE_CHILDREN), its tier (`slow` or
`fast`), its xdist group and the expensive events it caused, in this process or in any child
process: `pipeline_run`, `saved_model_export`, `tf_process` (ledger_site/bigtrain_ledger_hook.py
says what each counts). Under pytest-xdist each worker measures its own tests and attaches the
figures to the teardown report (`user_properties`, serialised to the controller); the controller
writes build/test-ledger.json and prints the 25 most expensive tests, the CPU-s per tier and the
event totals at the end of the run.

Guard: tests/suite_budget.json caps each event per xdist group. A group over a cap fails the run
(exit status 1) with one message per offence; so does a group absent from the budget with any
count, in a whole tier (--ledger-whole: make test, make test-fast). Counts, not seconds: a loaded
machine cannot fail it. Partial runs (-k, one file) count less and pass; a new group there gets a
note naming the one command that adds it. After a deliberate change, regenerate the caps from a full run:

    make test && .venv/bin/python -m tests.support.ledger --write-budget

How events reach the ledger: the controller makes a fresh folder build/ledger-events/<pid>/ and
puts ledger_site/ first on PYTHONPATH; every pytest process sets $BIGTRAIN_LEDGER_EVENTS to its
own file in that folder (children inherit it) and installs the hook; children install it from
ledger_site/sitecustomize.py. No TensorFlow is imported here.

Options: --ledger PATH (default build/test-ledger.json; empty: no ledger, no guard),
--ledger-budget PATH (default tests/suite_budget.json; empty, or no such file: no guard)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import resource
import shutil
import sys
import time

import pytest

from tests.support.fork_server import forks_cpu_seconds
from tests.support.ledger_budget import (  # noqa: F401 (main: `python -m tests.support.ledger`)
    DEFAULT_BUDGET, DEFAULT_LEDGER, check_budget, load_budget, main, unbudgeted, write_json)

HERE = os.path.dirname(os.path.abspath(__file__))
SITE = os.path.join(HERE, "ledger_site")
DIR_VAR = "BIGTRAIN_LEDGER_DIR"
OUTSIDE = "<outside tests>"
TOP = 25


def hook_module():
    """ledger_site/bigtrain_ledger_hook.py as the one module `bigtrain_ledger_hook` (the name
    sitecustomize imports it by), so a process never holds two copies of the hook."""
    module = sys.modules.get("bigtrain_ledger_hook")
    if module is None:
        spec = importlib.util.spec_from_file_location(
            "bigtrain_ledger_hook", os.path.join(SITE, "bigtrain_ledger_hook.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules["bigtrain_ledger_hook"] = module
        spec.loader.exec_module(module)
    return module


# The hook owns the events' names and its variables (it runs in children without this package).
EVENTS, EVENTS_VAR, GROUP_VAR = hook_module().EVENTS, hook_module().EVENTS_VAR, hook_module().GROUP_VAR


def record(event: str) -> None:
    """The hook's own recording path (what a wrapped function or a TensorFlow import calls)."""
    hook_module().record(event)


@contextlib.contextmanager
def counted_as(group: str):
    """Count the events inside (this process's and its children's) under `group`, not under the
    running test's xdist group. For a session-wide cache that xdist workers share (built once,
    under a file lock, by whichever test of whichever group comes first): its run or export is
    then counted once, in one group, whatever the schedule, and the budget can cap it there."""
    old = os.environ.get(GROUP_VAR)
    os.environ[GROUP_VAR] = group
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(GROUP_VAR, None)
        else:
            os.environ[GROUP_VAR] = old


def cpu_seconds() -> tuple[float, float]:
    """(this process's user+sys, its children's user+sys) so far: the children it reaped, and
    the forks its fork servers reaped (tests/support/fork_server.py; once the server exits they
    are in RUSAGE_CHILDREN instead)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime + forks_cpu_seconds()


# ---------------------------------------------------------------------------- the pytest plugin

def pytest_addoption(parser):
    group = parser.getgroup("ledger", "test-cost ledger and its count guard (tests/support/ledger.py)")
    group.addoption("--ledger", default=None, metavar="PATH",
                    help=f"where the controller writes the ledger (default {DEFAULT_LEDGER} under "
                         "the rootdir; an empty value turns the ledger and its guard off)")
    group.addoption("--ledger-budget", default=None, metavar="PATH",
                    help=f"the event caps per xdist group (default {DEFAULT_BUDGET}; an empty "
                         "value turns the guard off, as does a missing file)")
    group.addoption("--ledger-whole", action="store_true", default=False,
                    help="a whole tier (make test, make test-fast): a group absent from the "
                         "budget fails the run; without it, such a group only gets a note")


def pytest_configure(config):
    # The groups' marker (tests/conftest.py), known also when xdist is off (-p no:xdist).
    config.addinivalue_line("markers", "xdist_group(name): the pytest-xdist group of the test")
    out = config.getoption("--ledger")
    if out == "" or config.getoption("collectonly"):
        return
    config.pluginmanager.register(Ledger(config, out), "bigtrain-ledger")


class Ledger:
    def __init__(self, config, out):
        self.config = config
        root = str(config.rootpath)
        self.out = os.path.join(root, out or DEFAULT_LEDGER)
        budget = config.getoption("--ledger-budget")
        self.budget = None if budget == "" else os.path.join(root, budget or DEFAULT_BUDGET)
        self.worker = getattr(config, "workerinput", {}).get("workerid")
        self.saved_env = {k: os.environ.get(k) for k in (DIR_VAR, EVENTS_VAR, "PYTHONPATH")}
        if self.worker is None:   # the controller (or the one process without xdist)
            self.events_dir = os.path.join(root, "build", "ledger-events", str(os.getpid()))
            remove_stale_event_folders(os.path.dirname(self.events_dir))
            shutil.rmtree(self.events_dir, ignore_errors=True)
            os.makedirs(self.events_dir)
            os.environ[DIR_VAR] = self.events_dir
            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [SITE, os.environ.get("PYTHONPATH")]))
        else:
            self.events_dir = os.environ[DIR_VAR]
        os.environ[EVENTS_VAR] = os.path.join(self.events_dir, f"{self.worker or 'controller'}.jsonl")
        hook_module().install()
        record("pytest_process")          # this pid's own TensorFlow import is not a tf_process
        self.records: dict[str, dict] = {}     # controller: nodeid -> figures
        self.outcomes: dict[str, str] = {}
        self.tests_cpu = 0.0                   # this process's tests, CPU-s
        self.workers: list[dict] = []
        self.summary: dict | None = None
        self.offences: list[str] = []
        self.notes: list[str] = []

    def pytest_unconfigure(self, config):
        for key, value in self.saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    # -- every process that runs tests: measure

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        item.stash[_START] = (time.perf_counter(), *cpu_seconds())
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        start = item.stash.get(_START, None)
        if call.when != "teardown" or start is None:
            return
        wall0, own0, kids0 = start
        own, kids = cpu_seconds()
        self.tests_cpu += (own - own0) + (kids - kids0)
        mark = item.get_closest_marker("xdist_group")
        group = (mark.args[0] if mark.args else mark.kwargs.get("name")) if mark else None
        outcome.get_result().user_properties.append(("ledger", {
            "group": group or item.nodeid.split("::", 1)[0],
            "tier": "slow" if item.get_closest_marker("slow") else "fast",
            "wall_s": round(time.perf_counter() - wall0, 3),
            "cpu_s": round((own - own0) + (kids - kids0), 3),
            "cpu_self_s": round(own - own0, 3), "cpu_children_s": round(kids - kids0, 3),
            "worker": self.worker or "controller"}))

    def pytest_sessionfinish(self, session):
        if self.worker is not None and hasattr(self.config, "workeroutput"):
            self.config.workeroutput["ledger"] = self.process_figures()

    def process_figures(self) -> dict:
        own, kids = cpu_seconds()
        total = own + kids        # since the process started: imports and collection included
        return {"worker": self.worker or "controller", "pid": os.getpid(),
                "cpu_s": round(total, 3), "tests_cpu_s": round(self.tests_cpu, 3),
                "outside_tests_cpu_s": round(total - self.tests_cpu, 3)}

    # -- the controller: collect, write, guard, print

    def pytest_runtest_logreport(self, report):
        if self.worker is not None:
            return
        if report.failed:
            self.outcomes[report.nodeid] = "failed"
        elif report.skipped and report.when != "teardown":
            self.outcomes.setdefault(report.nodeid, "skipped")
        if report.when == "teardown":
            self.outcomes.setdefault(report.nodeid, "passed")
            for name, value in report.user_properties:
                if name == "ledger":
                    self.records[report.nodeid] = dict(value, nodeid=report.nodeid)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        figures = getattr(node, "workeroutput", {}).get("ledger")
        if figures:
            self.workers.append(figures)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session):
        outcome = yield
        if self.worker is not None:
            return
        if not any(w["worker"] != "controller" for w in self.workers):
            self.workers.append(self.process_figures())     # no xdist: this process ran the tests
        self.summary = build_ledger(list(self.records.values()), read_events(self.events_dir),
                                    self.workers, self.outcomes, args=list(self.config.invocation_params.args))
        self.summary["totals"]["controller_cpu_s"] = round(sum(cpu_seconds()), 3) \
            if any(w["worker"] != "controller" for w in self.workers) else None
        write_json(self.out, self.summary)
        shutil.rmtree(self.events_dir, ignore_errors=True)
        if self.budget is None:
            self.notes.append("ledger guard: off (--ledger-budget='')")
        elif not os.path.exists(self.budget):
            self.notes.append(f"ledger guard: off, no budget file {os.path.relpath(self.budget, str(self.config.rootpath))} (write one: "
                              ".venv/bin/python -m tests.support.ledger --write-budget)")
        elif outcome.excinfo is None:      # an interrupted run is not judged
            rel = os.path.relpath(self.budget, str(self.config.rootpath))
            budget, whole = load_budget(self.budget), self.config.getoption("--ledger-whole")
            self.offences = check_budget(self.summary, budget, rel, whole)
            self.notes += [] if whole else unbudgeted(self.summary, budget, rel)
            self.notes.append(f"ledger guard: {len(self.offences) or 'no'} group/event count(s) "
                              f"over the caps of {rel}")
            if self.offences:
                session.testsfailed += 1     # exit status 1 (TESTS_FAILED)

    def pytest_terminal_summary(self, terminalreporter):
        if self.worker is not None or self.summary is None:
            return
        for line in summary_lines(self.summary, os.path.relpath(self.out, str(self.config.rootpath))):
            terminalreporter.write_line(line)
        for note in self.notes:
            terminalreporter.write_line(note)
        for offence in self.offences:
            terminalreporter.write_line(offence, red=True, bold=True)


_START = pytest.StashKey[tuple]()


# ------------------------------------------------------------------------------- the arithmetic

def remove_stale_event_folders(parent: str) -> None:
    """Event folders of runs that ended without cleaning up (killed): their pid is gone."""
    for name in os.listdir(parent) if os.path.isdir(parent) else ():
        try:
            os.kill(int(name), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
        except (ValueError, OSError):
            pass


def read_events(folder: str) -> list[dict]:
    events = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
        with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    events.append(json.loads(line))
                except ValueError:        # a line cut by a kill -9 mid-write: not an event
                    pass
    return events


def build_ledger(records: list[dict], events: list[dict], workers: list[dict],
                 outcomes: dict[str, str] | None = None, args: list[str] | None = None) -> dict:
    """The ledger: one record per test, per-group and per-tier totals, event totals."""
    by_id = {r["nodeid"]: dict(r, events={}, outcome=(outcomes or {}).get(r["nodeid"]))
             for r in records}
    pytest_pids = {e.get("pid") for e in events if e.get("event") == "pytest_process"}
    groups: dict[str, dict] = {}
    for r in by_id.values():
        g = groups.setdefault(r["group"], {"tests": 0, "cpu_s": 0.0, "wall_s": 0.0, "events": {}})
        g["tests"] += 1
        g["cpu_s"] += r["cpu_s"]
        g["wall_s"] += r["wall_s"]
    for e in events:
        event = e.get("event")
        if event not in EVENTS or (event == "tf_process" and e.get("pid") in pytest_pids):
            continue
        nodeid = e["test"].rsplit(" (", 1)[0] if e.get("test") else None
        record = by_id.get(nodeid)
        if record is not None:
            record["events"][event] = record["events"].get(event, 0) + 1
            group = record["group"]
        else:   # no test running (collection, a process started outside a test) or unreported
            group = nodeid.split("::", 1)[0] if nodeid else OUTSIDE
        group = e.get("group") or group      # counted_as: a shared cache's own group
        g = groups.setdefault(group, {"tests": 0, "cpu_s": 0.0, "wall_s": 0.0, "events": {}})
        g["events"][event] = g["events"].get(event, 0) + 1
    tiers = {}
    for r in by_id.values():
        t = tiers.setdefault(r["tier"], {"tests": 0, "cpu_s": 0.0, "wall_s": 0.0})
        t["tests"] += 1
        t["cpu_s"] += r["cpu_s"]
        t["wall_s"] += r["wall_s"]
    event_totals = {ev: sum(g["events"].get(ev, 0) for g in groups.values()) for ev in EVENTS}
    rounded = lambda d: {k: (round(v, 3) if isinstance(v, float) else v) for k, v in d.items()}
    return {
        "version": 1,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "args": args or [],
        "tests": sorted(by_id.values(), key=lambda r: r["nodeid"]),
        "events": [e for e in events if e.get("event") in EVENTS],   # as recorded, for a look
        "groups": {name: rounded(g) for name, g in sorted(groups.items())},
        "totals": {
            "tests": len(by_id),
            "cpu_s": round(sum(r["cpu_s"] for r in by_id.values()), 3),
            "tiers": {name: rounded(t) for name, t in sorted(tiers.items())},
            "events": event_totals,
            "processes": sorted(workers, key=lambda w: w["worker"]),
            "outside_tests_cpu_s": round(sum(w["outside_tests_cpu_s"] for w in workers), 3),
        },
    }


def summary_lines(ledger: dict, path: str) -> list[str]:
    totals = ledger["totals"]
    lines = [f"test-cost ledger: {path} ({totals['tests']} tests, {totals['cpu_s']:.1f} CPU-s in tests)",
             f"{TOP} most expensive tests by CPU-s (user+sys, own process + reaped children):",
             f"{'cpu_s':>9} {'wall_s':>8} {'tier':4}  {'events':26}  test"]
    top = sorted(ledger["tests"], key=lambda r: -r["cpu_s"])[:TOP]
    for r in top:
        ev = " ".join(f"{short}{r['events'][e]}" for e, short in
                      (("pipeline_run", "run="), ("saved_model_export", "export="), ("tf_process", "tf="))
                      if r["events"].get(e))
        lines.append(f"{r['cpu_s']:9.1f} {r['wall_s']:8.1f} {r['tier']:4}  {ev or '-':26}  {r['nodeid']}")
    tiers = ", ".join(f"{name} {t['cpu_s']:.1f} CPU-s ({t['tests']} tests)"
                      for name, t in totals["tiers"].items())
    lines.append(f"CPU-s per tier: {tiers or 'none'}; outside tests (collection, imports, "
                 f"session start): {totals['outside_tests_cpu_s']:.1f} CPU-s"
                 + (f"; controller {totals['controller_cpu_s']:.1f}" if totals.get("controller_cpu_s") else ""))
    lines.append("events: " + ", ".join(f"{e} {n}" for e, n in totals["events"].items())
                 + " (tf_process: processes other than pytest's own that imported tensorflow)")
    return lines


if __name__ == "__main__":
    sys.exit(main())
