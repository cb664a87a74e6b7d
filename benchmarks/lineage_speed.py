"""Lineage questions and `bigtrain ui` pages as history grows: every figure must stay <= 1 s with
10,000 runs in the store. A store is grown by cloning one run's contexts, executions, artifacts
and events N times directly in the sqlite tables (MLMD's API would take an hour for 10,000 runs);
the clones are newer than the source runs, so `latest` is a clone and the source's first pushed
version is deep in the history.

  python benchmarks/lineage_speed.py [--runs 1000,10000] [--home HOME]

--home: clone the newest complete run of a real home's store (default: the synthetic store of
benchmarks/support/lineage_store.py). Each figure: the best of 3, a fresh Lineage (cold caches) each."""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import _machine  # noqa: E402
from runners.local.home import default_sqlite_path  # noqa: E402

PROPERTY_TABLES = (("Execution", "ExecutionProperty", "execution_id"),
                   ("Artifact", "ArtifactProperty", "artifact_id"),
                   ("Context", "ContextProperty", "context_id"))


def _copy_properties(db, table: str, key: str, old: int, new: int) -> None:
    db.execute(f"INSERT INTO {table} SELECT ?, name, is_custom_property, int_value, double_value, "
               f"string_value, byte_value, proto_value, bool_value FROM {table} WHERE {key} = ?",
               (new, old))


def clone_run(db: sqlite3.Connection, run_ctx_id: int, copies: int, step_ms: int = 60_000) -> None:
    """`copies` clones of run context run_ctx_id: a new run context each (name '<name>-c<i>'),
    its executions (same node and pipeline contexts), their output artifacts (uri '<uri>-c<i>')
    and events; inputs produced inside the run point at the clone's own artifacts."""
    name, ctype, ctime = db.execute("SELECT name, type_id, create_time_since_epoch FROM Context "
                                    "WHERE id = ?", (run_ctx_id,)).fetchone()
    executions = db.execute("SELECT e.id, e.type_id, e.last_known_state, e.create_time_since_epoch,"
                            " e.last_update_time_since_epoch FROM Execution e JOIN Association a "
                            "ON a.execution_id = e.id WHERE a.context_id = ? ORDER BY e.id",
                            (run_ctx_id,)).fetchall()
    exec_ids = [e[0] for e in executions]
    marks = ",".join("?" * len(exec_ids))
    other_contexts = {e: [c for (c,) in db.execute("SELECT context_id FROM Association WHERE "
                                                   "execution_id = ? AND context_id != ?",
                                                   (e, run_ctx_id))] for e in exec_ids}
    events = db.execute(f"SELECT id, artifact_id, execution_id, type, milliseconds_since_epoch "
                        f"FROM Event WHERE execution_id IN ({marks}) ORDER BY id", exec_ids).fetchall()
    outputs = {a for _, a, _, t, _ in events if t in (3, 4, 6)}  # OUTPUT, DECLARED/INTERNAL_OUTPUT
    paths = {ev[0]: db.execute("SELECT is_index_step, step_index, step_key FROM EventPath WHERE "
                               "event_id = ?", (ev[0],)).fetchall() for ev in events}
    artifacts = {a: db.execute("SELECT type_id, uri, state, create_time_since_epoch, "
                               "last_update_time_since_epoch FROM Artifact WHERE id = ?",
                               (a,)).fetchone() for a in outputs}
    for i in range(1, copies + 1):
        shift = i * step_ms + 10_000_000
        cur = db.execute("INSERT INTO Context (type_id, name, create_time_since_epoch, "
                         "last_update_time_since_epoch) VALUES (?, ?, ?, ?)",
                         (ctype, f"{name}-c{i}", ctime + shift, ctime + shift))
        ctx = cur.lastrowid
        _copy_properties(db, "ContextProperty", "context_id", run_ctx_id, ctx)
        new_exec, new_art = {}, {}
        for e, type_id, state, created, updated in executions:
            new_exec[e] = db.execute("INSERT INTO Execution (type_id, last_known_state, "
                                     "create_time_since_epoch, last_update_time_since_epoch) "
                                     "VALUES (?, ?, ?, ?)",
                                     (type_id, state, created + shift, updated + shift)).lastrowid
            _copy_properties(db, "ExecutionProperty", "execution_id", e, new_exec[e])
            db.executemany("INSERT INTO Association (context_id, execution_id) VALUES (?, ?)",
                           [(c, new_exec[e]) for c in [ctx] + other_contexts[e]])
        for a, (type_id, uri, state, created, updated) in artifacts.items():
            new_art[a] = db.execute("INSERT INTO Artifact (type_id, uri, state, create_time_since_"
                                    "epoch, last_update_time_since_epoch) VALUES (?, ?, ?, ?, ?)",
                                    (type_id, f"{uri}-c{i}", state, created + shift,
                                     updated + shift)).lastrowid
            _copy_properties(db, "ArtifactProperty", "artifact_id", a, new_art[a])
            db.execute("INSERT INTO Attribution (context_id, artifact_id) VALUES (?, ?)",
                       (ctx, new_art[a]))
        for event_id, a, e, kind, ms in events:
            new_event = db.execute("INSERT INTO Event (artifact_id, execution_id, type, "
                                   "milliseconds_since_epoch) VALUES (?, ?, ?, ?)",
                                   (new_art.get(a, a), new_exec[e], kind, (ms or 0) + shift)).lastrowid
            db.executemany("INSERT INTO EventPath (event_id, is_index_step, step_index, step_key) "
                           "VALUES (?, ?, ?, ?)", [(new_event, *p) for p in paths[event_id]])


def grow(source_sqlite: str, out_sqlite: str, total_runs: int, run_name: str | None) -> list[str]:
    """Clone one run up to total_runs; returns the event folders it made for the newest clone."""
    shutil.copyfile(source_sqlite, out_sqlite)
    with sqlite3.connect(out_sqlite) as db:
        runs = db.execute("SELECT c.id, c.name FROM Context c JOIN Type t ON t.id = c.type_id "
                          "WHERE t.name = 'pipeline_run' ORDER BY c.id").fetchall()
        source = next((r for r in runs if r[1] == run_name), runs[0]) if run_name else runs[-1]
        copies = max(0, total_runs - len(runs))
        clone_run(db, source[0], copies)
        return newest_clone_curves(db, source[0], copies)


def newest_clone_curves(db: sqlite3.Connection, run_ctx_id: int, copies: int) -> list[str]:
    """The clones' artifact URIs name folders that do not exist ('<uri>-c<i>'): give the newest
    clone (the one the curves page is timed on) a copy of the source run's ModelRun folder, so
    the page reads and draws its events. Returns the folders made (removed after measuring)."""
    made = []
    for (uri,) in db.execute("SELECT a.uri FROM Artifact a JOIN Type t ON t.id = a.type_id JOIN "
                             "Attribution at ON at.artifact_id = a.id WHERE at.context_id = ? AND "
                             "t.name = 'ModelRun'", (run_ctx_id,)):
        clone = f"{uri}-c{copies}"
        if copies and os.path.isdir(uri) and not os.path.exists(clone):
            shutil.copytree(uri, clone)
            made.append(clone)
    return made


def _best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def measure(sqlite_path: str, home: str, oldest_pushed: str, oldest_model: str) -> dict[str, float]:
    from pipeline.lineage import explore, queries, report, run_diff
    from pipeline.lineage.store import Lineage
    from benchmarks.support.mlmd import connect
    from pipeline.lineage.web.app import create_app
    from runners.local.home import readable_folders
    fresh = lambda: Lineage(connect(sqlite_path))  # noqa: E731
    newest = fresh().run("latest")
    client = create_app(fresh, readable_folders(home)).test_client()
    model = explore.pushed_model(fresh(), newest.name).get("Model", {}).get("id")
    figures = {
        "lineage runs (20)": lambda: queries.list_runs(fresh()),
        "lineage trace <oldest pushed version>": lambda: queries.trace(fresh(), oldest_pushed),
        "lineage trace --down <oldest model id>": lambda: queries.trace(fresh(), oldest_model, down=True),
        "lineage diff latest latest~1": lambda: run_diff.diff(fresh(), "latest", "latest~1"),
        "lineage why latest": lambda: queries.why(fresh(), "latest"),
        "lineage graph latest": lambda: queries.graph(fresh(), "latest"),
        "run report latest": lambda: report.run_report(fresh().store, "latest"),
        "page /": lambda: client.get("/"),
        "page /?state=failed": lambda: client.get("/?state=failed"),
        f"page /run/{newest.name}": lambda: client.get(f"/run/{newest.name}"),
        f"page /artifact/{model}": lambda: client.get(f"/artifact/{model}"),
        "page /models": lambda: client.get("/models"),
        "page /diff": lambda: client.get("/diff?a=latest&b=latest~1"),
        f"page /run/{newest.name}/curves": lambda: client.get(f"/run/{newest.name}/curves"),
    }
    warm = client.get(f"/run/{newest.name}/curves")  # imports: `bigtrain ui` warms them too
    charts = warm.get_data(as_text=True).count("<svg")
    print(f"  (curves page of {newest.name}: {charts} charts drawn)")
    return {name: _best(fn) for name, fn in figures.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="1000,10000")
    parser.add_argument("--home", help="a real home to clone (default: the synthetic store)")
    args = parser.parse_args()
    print(f"machine: {_machine.describe()}")
    work = tempfile.mkdtemp(prefix="lineage_speed_")
    try:
        if args.home:
            home = os.path.abspath(args.home)
            run_name = None
        else:
            from benchmarks.support import lineage_store
            home = os.path.join(work, "home")
            lineage_store.build(home)
            run_name = "run-b"  # the fine-tuned, tuned, pushed one
        from pipeline.lineage import explore, queries
        from pipeline.lineage.store import Lineage
        from benchmarks.support.mlmd import connect
        oldest = [r for r in reversed(queries.list_runs(Lineage(connect(
            default_sqlite_path(home))), limit=None)) if r["pushed_version"]][0]
        pushed = explore.pushed_model(Lineage(connect(default_sqlite_path(home))),
                                      oldest["run_id"])
        destination, oldest_model = pushed["destination"], str(pushed["Model"]["id"])
        for total in (int(n) for n in args.runs.split(",")):
            grown = os.path.join(work, f"grown-{total}.sqlite")
            started = time.perf_counter()
            made = grow(default_sqlite_path(home), grown, total, run_name)
            print(f"\n{total} runs in the store (grown in {time.perf_counter() - started:.1f} s)")
            try:
                for name, seconds in measure(grown, home, destination, oldest_model).items():
                    print(f"  {name:<52} {seconds:7.3f} s{'  OVER 1 s' if seconds > 1 else ''}")
            finally:
                for folder in made:
                    shutil.rmtree(folder, ignore_errors=True)
                os.remove(grown)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
