"""Re-run ratio: `bigtrain run` twice with the same config in one fresh home.

Target (up to date in a blink): the identical second run takes at most 10% of the first run's
wall time: nothing changed, so it prints the last report without starting TFX (going through
TFX's per-stage cache instead costs about 15%; TFX's penguin example re-runs Transform..Pusher
and takes 68% on this machine). For reference a third run with --force goes
through TFX with every stage cached. All runs are whole CLI processes, imports included, measured
side by side here.

    .venv/bin/python benchmarks/rerun_cache.py [--preset tiny] [--set KEY=VALUE ...]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from _machine import describe  # noqa: E402

TARGET = 0.10


def timed_run(bigtrain: str, home: str, extra: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run([bigtrain, "run", "--home", home, *extra], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode:
        sys.exit(f"bigtrain run failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return elapsed, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    bigtrain = os.path.join(os.path.dirname(sys.executable), "bigtrain")
    extra = ["--preset", args.preset] + [f"--set={o}" for o in args.overrides]
    with tempfile.TemporaryDirectory(prefix="bigtrain-bench-") as home:
        first, _ = timed_run(bigtrain, home, extra)
        second, report = timed_run(bigtrain, home, extra)
        forced, forced_report = timed_run(bigtrain, home, extra + ["--force"])
    if "run UP TO DATE" not in report:
        sys.exit("the identical second run was not up to date:\n" + report[-3000:])
    stages = [l.split()[:2] for l in forced_report.splitlines() if l.startswith("  ") and
              len(l.split()) >= 2 and l.split()[1] in ("complete", "cached", "failed")]
    ratio = second / first
    print(f"machine: {describe()}")
    print(f"first run  {first:8.1f} s")
    print(f"second run {second:8.1f} s   (up to date: pipeline not started)")
    print(f"--force    {forced:8.1f} s   ({forced / first:.3f} of the first; stages: "
          + ", ".join(f"{n}={s}" for n, s in stages) + ")")
    print(f"ratio second/first = {ratio:.3f} (target <= {TARGET}) -> {'MET' if ratio <= TARGET else 'MISSED'}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
