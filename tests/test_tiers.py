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
    """Caught: a tier that drops $(XDIST) (back to one core), an XDIST without --dist loadgroup
    (xdist then ignores the groups: each worker builds the shared pipeline runs itself), or with
    xdist's reordering by group size (the longest groups no longer start first)."""
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as fh:
        xdist = re.search(r"^XDIST \?= (.*)$", fh.read(), re.M).group(1).split()
    assert xdist[xdist.index("--dist") + 1] == "loadgroup" and "--no-loadscope-reorder" in xdist
    assert "-n" in xdist
    assert "$(XDIST)" in make_recipe("test") and "$(XDIST)" in make_recipe("test-fast")
    assert '-m "not slow"' in make_recipe("test-fast") and '-m "' not in make_recipe("test")


def test_a_module_stays_whole_and_modules_sharing_a_fixture_share_a_worker():
    """Caught: grouping test by test (a module whose first test uses the shared export and whose
    second does not would build its module fixtures on two workers: seen on 2026-11-23, the
    variants' export built twice, 100 s each at that load)."""
    item = lambda nodeid, *fixtures: SimpleNamespace(nodeid=nodeid, fixturenames=list(fixtures))
    groups = conftest.xdist_groups([
        item("tests/export/test_a.py::test_one", "tmp_path", "loaded"),
        item("tests/export/test_a.py::test_two", "model_dir"),
        item("tests/export/test_b.py::test_three", "exported"),
        item("tests/e2e/test_c.py::test_four", "failed_run", "data_run"),
        item("tests/config/test_d.py::test_five", "tmp_path"),
    ])
    assert groups == {"tests/export/test_a.py": "export-model", "tests/export/test_b.py": "export-model",
                      "tests/e2e/test_c.py": "e2e-pipeline-runs",
                      "tests/config/test_d.py": "tests/config/test_d.py"}


def test_every_ranked_group_exists():
    """A renamed module or group would silently lose its rank (and start last)."""
    shared = set(conftest.SHARED_FIXTURE_GROUPS.values())
    for group in conftest.LONGEST_GROUPS:
        assert group in shared or os.path.isfile(os.path.join(ROOT, group)), group
