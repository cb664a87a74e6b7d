"""The test-cost ledger and its count guard (tests/support/ledger.py, docs/operations.md#test-tiers):
small pytest sessions run in this process (pytester), with a planted test that records events
through the hook's own recording path, and a child process that records its event itself. No
TensorFlow, no pipeline."""

import json
import os
import sys

import pytest

from tests.support import ledger, ledger_budget

pytest_plugins = ["pytester"]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A planted test in the group "planted": `runs` pipeline runs, recorded as the hook records them.
PLANTED = """
import pytest
from tests.support import ledger

@pytest.mark.xdist_group("planted")
def test_planted():
    for _ in range({runs}):
        ledger.record("pipeline_run")
"""


def run_session(pytester, source: str, budget: dict | None, *, own_process: bool = False,
                extra: tuple[str, ...] = ()):
    """own_process: run the session in a fresh interpreter (PYTHONPATH must reach ROOT), for a
    check that reads the process's CPU; in this process, threads that other tests left behind (a
    Beam job killed mid-stage) add theirs: a CI run once saw `pass` take 1.5 CPU-s, 60.7 s wall."""
    pytester.makepyfile(test_planted=source)
    args = ["-p", "tests.support.ledger", "-p", "no:cacheprovider", "-p", "no:xdist", *extra]
    if budget is not None:
        pytester.path.joinpath("budget.json").write_text(json.dumps(budget))
        args += ["--ledger-budget", "budget.json"]
    if own_process:
        result = pytester.runpytest_subprocess(*args)
    else:
        result = pytester.runpytest(*args)
    with open(pytester.path / "build" / "test-ledger.json", encoding="utf-8") as fh:
        return result, json.load(fh)


def caps(**events) -> dict:
    return {"groups": {"planted": events}}


def test_one_planted_pipeline_run_over_the_cap_fails_the_run(pytester):
    """The group's budget allows 1 pipeline run; the planted test makes 2. Caught: a guard that
    does not fail the run (exit status), does not name group, event, count and cap, or does not
    say how to raise the cap on purpose."""
    result, book = run_session(pytester, PLANTED.format(runs=2), caps(pipeline_run=1))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert ("ledger guard: group 'planted' ran 2 pipeline_run, over its cap of 1 (budget.json); "
            "tests: test_planted.py::test_planted") in out
    assert "python -m tests.support.ledger --write-budget" in out
    (test,) = book["tests"]
    assert test["group"] == "planted" and test["events"] == {"pipeline_run": 2}
    assert book["totals"]["events"]["pipeline_run"] == 2


@pytest.mark.parametrize("runs", [0, 1, 2])
def test_counts_at_or_below_the_cap_pass(pytester, runs):
    """A partial run (one file, -k) counts less than the whole suite did: it must pass."""
    result, book = run_session(pytester, PLANTED.format(runs=runs), caps(pipeline_run=2))
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "ledger guard: no group/event count(s) over the caps of budget.json" in result.stdout.str()
    assert book["totals"]["events"]["pipeline_run"] == runs


def test_a_group_absent_from_the_budget_fails_a_whole_tier_with_any_count(pytester):
    result, _ = run_session(pytester, PLANTED.format(runs=1), {"groups": {"other": {"pipeline_run": 5}}},
                            extra=("--ledger-whole",))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "ledger guard: group 'planted' is not in budget.json and ran 1 pipeline_run" in result.stdout.str()


def test_a_new_group_in_a_partial_run_passes_with_the_command_that_adds_it(pytester):
    """A new test module run alone (its group not yet in the budget) passes and is told the one
    command (the next test: a listed group over its cap still fails without --ledger-whole).
    Caught: a guard that fails a partial run on a new group."""
    budget = {"groups": {"other": {"pipeline_run": 5}}}
    result, _ = run_session(pytester, PLANTED.format(runs=1), budget)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert ("ledger guard: group 'planted' is not in budget.json yet (a new group: add it with "
            "`make test && .venv/bin/python -m tests.support.ledger --write-budget`)") in result.stdout.str()


def test_a_partial_run_still_fails_a_listed_group_over_its_cap(pytester):
    result, _ = run_session(pytester, PLANTED.format(runs=2), caps(pipeline_run=1))
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_written_allowance_raises_the_cap(pytester):
    budget = dict(caps(pipeline_run=1), allowances={"planted": {"pipeline_run": {"extra": 1, "why": "t"}}})
    result, _ = run_session(pytester, PLANTED.format(runs=2), budget)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


# The child: a fresh interpreter that inherits the test's environment, loads the hook from
# ledger_site/sitecustomize.py and calls a counted function (runners.orchestrators.kfp_local.run_pipeline_job,
# wrapped as its module loads; the bogus job then fails inside it, as it should).
CHILD = """
import subprocess, sys
import pytest

CODE = '''
import sys
import runners.orchestrators.kfp_local as k
try:
    k.run_pipeline_job({}, "unused")
except Exception as err:
    print("RAISED", type(err).__name__)
print("HOOKED", "bigtrain_ledger_hook" in sys.modules)
'''

@pytest.mark.xdist_group("children")
def test_child():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                         cwd=%r, check=True).stdout
    assert "RAISED KfpTaskError" in out and "HOOKED True" in out, out
"""


def test_a_child_process_records_its_event_against_the_test_that_started_it(pytester):
    """Caught: children that do not inherit the hook (PYTHONPATH, the events file), a counted
    function not wrapped when its module loads in a child, or an event attributed to no test. The
    wrapper passes the function's own exception through (KfpTaskError: the bogus job has no root)."""
    result, book = run_session(pytester, CHILD % ROOT, {"groups": {"children": {"pipeline_run": 1}}})
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    (test,) = book["tests"]
    assert test["nodeid"] == "test_planted.py::test_child" and test["events"] == {"pipeline_run": 1}
    assert book["groups"]["children"]["events"] == {"pipeline_run": 1}


def test_the_ledger_file_and_summary(pytester, monkeypatch):
    """Per test: wall and CPU seconds (own + children), tier, group; the summary's top list and
    tiers. A child that burns CPU shows up as the test's children CPU."""
    source = """
import subprocess, sys
import pytest

@pytest.mark.slow
def test_burns_in_a_child():
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)

def test_cheap():
    pass
"""
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    result, book = run_session(pytester, source, None, own_process=True)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    by_name = {t["nodeid"].rsplit("::", 1)[1]: t for t in book["tests"]}
    burn, cheap = by_name["test_burns_in_a_child"], by_name["test_cheap"]
    assert (burn["tier"], cheap["tier"]) == ("slow", "fast")
    assert burn["group"] == cheap["group"] == "test_planted.py"   # no xdist_group: the module
    assert burn["cpu_children_s"] > 0 and burn["cpu_s"] >= burn["cpu_children_s"]
    assert burn["cpu_s"] == pytest.approx(burn["cpu_self_s"] + burn["cpu_children_s"], abs=0.002)
    assert book["totals"]["tiers"]["slow"]["tests"] == 1 and book["totals"]["tiers"]["fast"]["tests"] == 1
    out = result.stdout.str()
    assert "25 most expensive tests by CPU-s" in out and "ledger guard: off, no budget file" in out
    top = out.index("test_planted.py::test_burns_in_a_child")
    assert top < out.index("test_planted.py::test_cheap")
    assert "CPU-s per tier: fast " in out and "slow " in out


def test_events_of_pytest_processes_and_cut_lines(tmp_path):
    """tf_process counts processes other than pytest's own (their TensorFlow import is the
    worker's fixed cost); a line cut by kill -9 is no event; an event outside any test counts
    under its own group."""
    events = tmp_path / "events"
    events.mkdir()
    lines = [{"event": "pytest_process", "pid": 1, "test": None},
             {"event": "tf_process", "pid": 1, "test": None},
             {"event": "tf_process", "pid": 2, "test": "t.py::a (setup)"},
             {"event": "saved_model_export", "pid": 1, "test": "t.py::a (call)"},
             {"event": "tf_process", "pid": 3, "test": None}]
    (events / "gw0.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines) + '{"event": "tf_pr')
    record = {"nodeid": "t.py::a", "group": "g", "tier": "fast", "wall_s": 1.0, "cpu_s": 2.0,
              "cpu_self_s": 1.5, "cpu_children_s": 0.5, "worker": "gw0"}
    book = ledger.build_ledger([record], ledger.read_events(str(events)), [
        {"worker": "gw0", "pid": 1, "cpu_s": 3.0, "tests_cpu_s": 2.0, "outside_tests_cpu_s": 1.0}])
    assert book["tests"][0]["events"] == {"tf_process": 1, "saved_model_export": 1}
    assert book["groups"]["g"]["events"] == {"tf_process": 1, "saved_model_export": 1}
    assert book["groups"][ledger.OUTSIDE]["events"] == {"tf_process": 1}
    assert book["totals"]["events"] == {"pipeline_run": 0, "saved_model_export": 1, "tf_process": 2}


def test_the_budget_is_written_from_a_ledger(tmp_path):
    """--write-budget: caps = counts; groups without events left out; written allowances kept;
    --merge keeps groups the ledger did not run. The written budget passes its own ledger."""
    book = {"totals": {"tests": 2}, "tests": [], "groups": {
        "a": {"events": {"pipeline_run": 2, "tf_process": 0}}, "b": {"events": {}}}}
    (tmp_path / "l.json").write_text(json.dumps(book))
    budget_path = tmp_path / "budget.json"
    budget_path.write_text(json.dumps({"groups": {"old": {"tf_process": 1}},
                                       "allowances": {"a": {"pipeline_run": {"extra": 1, "why": "x"}}}}))
    argv = ["--write-budget", "--ledger", str(tmp_path / "l.json"), "--budget", str(budget_path)]
    assert ledger.main(argv) == 0
    written = json.loads(budget_path.read_text())
    assert written["groups"] == {"a": {"pipeline_run": 2}}
    assert written["allowances"] == {"a": {"pipeline_run": {"extra": 1, "why": "x"}}}
    assert ledger_budget.cap(ledger_budget.load_budget(str(budget_path)), "a", "pipeline_run") == 3
    budget_path.write_text(json.dumps({"groups": {"old": {"tf_process": 1}}}))
    assert ledger.main([*argv, "--merge"]) == 0
    assert json.loads(budget_path.read_text())["groups"] == {"a": {"pipeline_run": 2}, "old": {"tf_process": 1}}


def test_the_hook_changes_nothing_it_wraps_and_is_off_without_the_variable(monkeypatch, tmp_path):
    hook = ledger.hook_module()

    def product(x, *, y):
        """doc"""
        if x < 0:
            raise ValueError(x)
        return x + y

    wrapped = hook.counted(product, "pipeline_run")
    monkeypatch.delenv(hook.EVENTS_VAR, raising=False)
    assert wrapped(1, y=2) == 3 and wrapped.__name__ == "product" and wrapped.__doc__ == "doc"
    with pytest.raises(ValueError):
        wrapped(-1, y=0)
    path = tmp_path / "events.jsonl"
    monkeypatch.setenv(hook.EVENTS_VAR, str(path))
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "t.py::x (call)")
    assert wrapped(1, y=1) == 2
    (line,) = [json.loads(l) for l in path.read_text().splitlines()]
    assert line == {"event": "pipeline_run", "pid": os.getpid(), "test": "t.py::x (call)", "group": None,
                    "cmd": " ".join(sys.argv)[:160]}
    monkeypatch.setenv(hook.EVENTS_VAR, str(tmp_path / "no-such-dir" / "e.jsonl"))
    assert wrapped(2, y=2) == 4          # a failure to record is not the program's failure


def test_sitecustomize_installs_nothing_without_the_variable(tmp_path):
    import subprocess
    env = {k: v for k, v in os.environ.items() if k != ledger.EVENTS_VAR}
    env["PYTHONPATH"] = os.pathsep.join([ledger.SITE, ROOT])
    out = subprocess.run([sys.executable, "-c", "import sys; print('bigtrain_ledger_hook' in sys.modules, "
                          "any(getattr(f, '_bigtrain_ledger', 0) for f in sys.meta_path))"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_two_ledgers_compared_name_the_counts_that_differ(tmp_path, capsys):
    a = {"groups": {"g": {"events": {"tf_process": 2}}, "h": {"events": {"pipeline_run": 1}}}}
    b = {"groups": {"g": {"events": {"tf_process": 3}}, "h": {"events": {"pipeline_run": 1}}}}
    for name, book in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps(book))
    assert ledger.main(["--compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 1
    assert capsys.readouterr().out.splitlines() == ["g: tf_process 2 -> 3"]
    assert ledger.main(["--compare", str(tmp_path / "a.json"), str(tmp_path / "a.json")]) == 0


def test_a_shared_cache_counts_under_its_own_group(pytester):
    """counted_as: what a session-wide cache builds is counted in the cache's group whichever
    test builds it (xdist's schedule decides which one), in this process and in its children."""
    source = """
import subprocess, sys
import pytest
from tests.support import ledger

@pytest.mark.xdist_group("first-user")
def test_builds_the_cache():
    with ledger.counted_as("the-cache"):
        ledger.record("saved_model_export")
        subprocess.run([sys.executable, "-c", "import bigtrain_ledger_hook as h; h.record('tf_process')"],
                       check=True)
    ledger.record("saved_model_export")
"""
    result, book = run_session(pytester, source, {"groups": {"the-cache": {"saved_model_export": 1, "tf_process": 1},
                                                            "first-user": {"saved_model_export": 1}}})
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert book["groups"]["the-cache"]["events"] == {"saved_model_export": 1, "tf_process": 1}
    assert book["groups"]["first-user"]["events"] == {"saved_model_export": 1}
