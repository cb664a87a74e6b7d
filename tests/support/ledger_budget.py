"""The ledger's budget (docs/operations.md#test-tiers): the caps per xdist group on the suite's
expensive events in tests/suite_budget.json, the check the plugin (tests/support/ledger.py) runs at
the end of a session, and the generator that writes the caps from a full run's ledger:

    make test && .venv/bin/python -m tests.support.ledger --write-budget

Plain functions over the ledger's JSON: no pytest, no TensorFlow."""

from __future__ import annotations

import argparse
import json
import os

DEFAULT_LEDGER = os.path.join("build", "test-ledger.json")
DEFAULT_BUDGET = os.path.join("tests", "suite_budget.json")
RAISE_HINT = ("on purpose? raise the cap: run the whole suite (make test), then "
              ".venv/bin/python -m tests.support.ledger --write-budget, and commit "
              "tests/suite_budget.json with the reason")


def load_budget(path: str) -> dict:
    """{"groups": {group: {event: cap}}, "allowances": {group: {event: {"extra": n, "why": ...}}}};
    a missing file is an empty budget (for the generator; the plugin then guards nothing)."""
    if not os.path.exists(path):
        return {"groups": {}, "allowances": {}}
    with open(path, encoding="utf-8") as fh:
        budget = json.load(fh)
    budget.setdefault("groups", {})
    budget.setdefault("allowances", {})
    return budget


def cap(budget: dict, group: str, event: str) -> int | None:
    """The group's cap for the event (its count in the budget plus any written allowance);
    None for a group the budget does not list."""
    if group not in budget["groups"]:
        return None
    extra = budget["allowances"].get(group, {}).get(event, {}).get("extra", 0)
    return int(budget["groups"][group].get(event, 0)) + int(extra)


def check_budget(ledger: dict, budget: dict, budget_path: str = DEFAULT_BUDGET,
                 whole: bool = True) -> list[str]:
    """One message per (group, event) over its cap; counts at or below the cap pass. A group the
    budget does not list is an offence only in a whole run (whole=False: a module run alone, -k;
    see unbudgeted for the note such a run prints instead)."""
    offences = []
    for group, figures in ledger["groups"].items():
        for event, count in sorted(figures["events"].items()):
            limit = cap(budget, group, event)
            if count == 0 or (limit is not None and count <= limit) or (limit is None and not whole):
                continue
            tests = sorted({r["nodeid"] for r in ledger["tests"]
                            if r["group"] == group and r["events"].get(event)})
            where = f"; tests: {', '.join(tests[:5])}{' ...' if len(tests) > 5 else ''}" if tests else ""
            if limit is None:
                head = f"ledger guard: group '{group}' is not in {budget_path} and ran {count} {event}"
            else:
                head = f"ledger guard: group '{group}' ran {count} {event}, over its cap of {limit} ({budget_path})"
            offences.append(f"{head}{where}. {RAISE_HINT}")
    return offences


def unbudgeted(ledger: dict, budget: dict, budget_path: str = DEFAULT_BUDGET) -> list[str]:
    """One note per group with counts that the budget does not list (a new group): what a partial
    run prints instead of failing, with the one command that adds it."""
    return [f"ledger guard: group '{group}' is not in {budget_path} yet (a new group: add it with "
            f"`make test && .venv/bin/python -m tests.support.ledger --write-budget`)"
            for group, figures in sorted(ledger["groups"].items())
            if group not in budget["groups"] and any(figures["events"].values())]


def write_json(path: str, data: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=False)
        fh.write("\n")
    os.replace(tmp, path)


# ------------------------------------------------------------------ the budget generator (CLI)

def budget_from_ledger(ledger: dict, old: dict | None = None, merge: bool = False) -> dict:
    """Caps = the ledger's counts per group (groups with no events are left out: cap 0). Keeps
    the old file's written allowances; with merge, keeps its groups the ledger did not run."""
    old = old or {"groups": {}, "allowances": {}}
    groups = dict(old["groups"]) if merge else {}
    for group, figures in ledger["groups"].items():
        counts = {e: n for e, n in sorted(figures["events"].items()) if n}
        if counts:
            groups[group] = counts
        elif merge:
            groups.pop(group, None)
    return {
        "_about": ("Caps per xdist group on the expensive events of the test suite "
                   "(tests/support/ledger.py; docs/operations.md#test-tiers). Generated from "
                   "build/test-ledger.json by `.venv/bin/python -m tests.support.ledger "
                   "--write-budget` after a full `make test`; a group absent here may count "
                   "nothing. `allowances` are written by hand: extra counts a group may reach "
                   "for a reason given there (a count that depends on timing)."),
        "groups": dict(sorted(groups.items())),
        "allowances": old.get("allowances", {}),
    }


def compare(first: dict, second: dict) -> list[str]:
    """The (group, event) counts that differ between two ledgers: run the same suite twice and
    compare, to find a count that depends on timing (it needs an allowance, or a fix)."""
    lines = []
    for group in sorted(set(first["groups"]) | set(second["groups"])):
        a = first["groups"].get(group, {}).get("events", {})
        b = second["groups"].get(group, {}).get("events", {})
        lines += [f"{group}: {event} {a.get(event, 0)} -> {b.get(event, 0)}"
                  for event in sorted(set(a) | set(b)) if a.get(event, 0) != b.get(event, 0)]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.ledger", description=(
        "Write the event budget (caps per xdist group) from a ledger of a full `make test`."))
    parser.add_argument("--write-budget", action="store_true", help="write the budget file")
    parser.add_argument("--ledger", default=DEFAULT_LEDGER, help=f"default {DEFAULT_LEDGER}")
    parser.add_argument("--budget", default=DEFAULT_BUDGET, help=f"default {DEFAULT_BUDGET}")
    parser.add_argument("--merge", action="store_true", help=(
        "keep the budget's groups that this ledger did not run (a partial run); without it the "
        "budget is exactly the ledger's groups (a full run)"))
    parser.add_argument("--compare", nargs=2, metavar=("LEDGER_A", "LEDGER_B"), help=(
        "print the group/event counts that differ between two ledgers (exit 1 if any)"))
    args = parser.parse_args(argv)
    if args.compare:
        ledgers = []
        for path in args.compare:
            with open(path, encoding="utf-8") as fh:
                ledgers.append(json.load(fh))
        differences = compare(*ledgers)
        print("\n".join(differences) or "the same counts in every group")
        return 1 if differences else 0
    with open(args.ledger, encoding="utf-8") as fh:
        ledger = json.load(fh)
    budget = budget_from_ledger(ledger, load_budget(args.budget), merge=args.merge)
    offences = check_budget(ledger, budget, args.budget)
    assert not offences, offences
    if args.write_budget:
        write_json(args.budget, budget)
        print(f"wrote {args.budget}: {len(budget['groups'])} groups, from {args.ledger} "
              f"({ledger['totals']['tests']} tests; args {' '.join(ledger.get('args', [])) or '-'})")
    else:
        print(json.dumps(budget, indent=1))
    return 0
