"""The test tiers' set-up (docs/operations.md#test-tiers): the Makefile runs both tiers under
pytest-xdist with the grouping of tests/conftest.py, and the grouping keeps every module, and
every set of modules sharing an expensive session fixture, on one worker."""

import os
import re
from types import SimpleNamespace

from tests import conftest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_recipe(target: str) -> str:
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as fh:
        text = fh.read()
    return re.search(rf"^{target}:.*\n((?:\t.*\n)+)", text, re.M).group(1)


def test_both_tiers_run_under_xdist_with_the_groups():
    """Caught: a tier that drops its $(XDIST) (back to one core), one without --dist loadgroup
    (xdist then ignores the groups: each worker builds the shared pipeline runs itself), or with
    xdist's reordering by group size (the longest groups no longer start first)."""
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as fh:
        text = fh.read()
    xdist = re.search(r"^XDIST \?= (.*)$", text, re.M).group(1).split()   # both tiers'
    assert xdist[xdist.index("--dist") + 1] == "loadgroup"
    assert "--no-loadscope-reorder" in xdist and "-n" in xdist
    assert "$(XDIST)" in make_recipe("test") and "$(XDIST)" in make_recipe("test-fast")
    assert '-m "not slow"' in make_recipe("test-fast") and '-m "' not in make_recipe("test")


def fake_item(nodeid, *fixtures, module_scoped=()):
    defs = {f: [SimpleNamespace(scope="module" if f in module_scoped else "function")] for f in fixtures}
    return SimpleNamespace(nodeid=nodeid, fixturenames=list(fixtures),
                           _fixtureinfo=SimpleNamespace(name2fixturedefs=defs))


def test_a_module_with_module_fixtures_stays_whole_and_shared_fixtures_share_a_worker():
    """Caught: grouping a module-fixture module test by test (its first test uses the shared
    export, its second does not: the module fixture was built on two workers, seen on 2026-11-23:
    the variants' export twice, 100 s each at that load), or a shared fixture whose users are not
    all in its group (built once per worker)."""
    groups = conftest.xdist_groups([
        fake_item("tests/export/test_a.py::test_one", "tmp_path", "loaded"),
        fake_item("tests/export/test_a.py::test_two", "model_dir", module_scoped=["model_dir"]),
        fake_item("tests/export/test_b.py::test_three", "exported"),
        fake_item("tests/e2e/test_c.py::test_four", "failed_run", "data_run"),
        fake_item("tests/e2e/test_c.py::test_five", "tmp_path"),
        fake_item("tests/config/test_d.py::test_six", "tmp_path"),
    ])
    assert groups == {
        "tests/export/test_a.py::test_one": "export-model",
        "tests/export/test_a.py::test_two": "export-model",
        "tests/export/test_b.py::test_three": "export-model",
        "tests/e2e/test_c.py::test_four": "e2e-pipeline-runs",
        "tests/e2e/test_c.py::test_five": "tests/e2e/test_c.py",   # free to run beside the chain
        "tests/config/test_d.py::test_six": "tests/config/test_d.py"}


def test_a_group_keeps_the_command_lines_order_and_the_longest_group_starts_first():
    """No e2e module reads another's runs, so a group's modules run in the order named (the
    reverse of path order here). Caught: a group's tests reordered (its modules sorted by path,
    as until 2026-12-07, or a module's own tests), a group split, a long group no longer first."""
    def item(nodeid, slow=True):
        marker = SimpleNamespace(name="slow") if slow else None
        return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: marker)

    named = [item("tests/config/test_d.py::test_fast", slow=False),
             item("tests/e2e/test_tuning.py::test_b"), item("tests/e2e/test_tuning.py::test_a"),
             item("tests/e2e/test_lineage.py::test_z"), item("tests/e2e/test_lineage.py::test_y"),
             item("tests/e2e/test_bad_input.py::test_x")]
    group_of = {i.nodeid: "tests/config/test_d.py" for i in named[:1]}
    group_of.update({i.nodeid: "e2e-pipeline-runs" for i in named[1:]})
    assert [i.nodeid for i in conftest.run_order(named, group_of)] == [
        "tests/e2e/test_tuning.py::test_b", "tests/e2e/test_tuning.py::test_a",
        "tests/e2e/test_lineage.py::test_z", "tests/e2e/test_lineage.py::test_y",
        "tests/e2e/test_bad_input.py::test_x",
        "tests/config/test_d.py::test_fast"]


def test_every_ranked_group_exists():
    """A renamed module or group would silently lose its rank (and start last)."""
    shared = set(conftest.SHARED_FIXTURE_GROUPS.values())
    for group in conftest.LONGEST_GROUPS:
        assert group in shared or os.path.isfile(os.path.join(ROOT, group)), group


def test_make_test_keeps_its_services_and_ci_times_each_phase():
    """`make test` does what it did before the split: set-up, then every service, then the suite;
    .ci/run times set-up, each service (side by side), the suite (`make test` itself, as the
    README shows it) and the README's first command (beside the suite). Caught: a service
    dropped from `make test` (its tests would skip outside CI), a service CI starts untimed or
    not at all, CI no longer running `make test`."""
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as fh:
        text = fh.read()
    assert re.search(r"^test: (.*)$", text, re.M).group(1).split() == ["setup", "services"]
    services = re.search(r"^SERVICES := (.*)$", text, re.M).group(1).split()
    assert services == ["mariadb", "objectstore", "browser", "hf-loader", "mlflow", "ray", "dask"]
    assert re.search(r"^services: \$\(SERVICES\)$", text, re.M)
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as fh:
        ci = fh.read()
    assert "  phase_start setup\n  make setup || status=$?\n  phase_end $status\n" in ci
    chains = re.search(r"^    side_by_side (.*) \|\| status=\$\?$", ci, re.M).group(1)
    chained = [target for chain in re.findall(r'"([^"]*)"|(\S+)', chains)
               for target in "".join(chain).split()]
    assert sorted(chained) == sorted(services)       # each service started (and timed) once
    assert 'phase_start "test suite"\n    make test || status=$?\n    phase_end $status' in ci
    assert 'background_phase "$jobs_dir" "first command" first_command\n' in ci
    assert 'collect_phase "$jobs_dir" "first command" ' in ci      # and its failure fails CI
    assert re.search(r"^first_command\(\) \{\n  \$NICE make run ARGS=", ci, re.M)


def test_each_services_fixed_ports_lie_below_the_ephemeral_range():
    """A fixed port inside Linux's ephemeral range (32768-60999) may be held by an outgoing
    connection of a service started before it: on 2026-12-07 a Dask worker's connection to its
    scheduler held 33306 and MariaDB failed with "Address already in use" (nothing listened
    there). Each service's port (and Ray's span of PORT+1 .. PORT+499, tests/support/ray.sh)
    lies below the range, and the script's default is the Makefile's. Caught: MARIADB_PORT back
    at 33306."""
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as fh:
        ports = {name.lower(): int(port) for name, port in
                 re.findall(r"^(\w+)_PORT \?= (\d+)$", fh.read(), re.M)}
    assert set(ports) == {"mariadb", "objectstore", "mlflow", "dask", "ray"}
    ephemeral = 32768
    if os.path.exists("/proc/sys/net/ipv4/ip_local_port_range"):
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="utf-8") as fh:
            ephemeral = min(ephemeral, int(fh.read().split()[0]))
    for name, port in ports.items():
        span = 499 if name == "ray" else 0
        assert 1024 <= port and port + span < ephemeral, (name, port, ephemeral)
        with open(os.path.join(ROOT, "tests", "support", f"{name}.sh"), encoding="utf-8") as fh:
            default = re.search(r"^PORT=\$\{BIGTRAIN_\w+_PORT:-(\d+)\}$", fh.read(), re.M)
        assert int(default.group(1)) == port, name

def test_the_cost_ledger_is_registered_for_every_run():
    """tests/conftest.py loads the ledger and its guard (tests/support/ledger.py): `make test`,
    `make test-fast` and any pytest run of the suite write build/test-ledger.json."""
    assert "tests.support.ledger" in conftest.pytest_plugins
