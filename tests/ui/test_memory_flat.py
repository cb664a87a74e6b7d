"""The UI opens a Lineage per request: none may outlive its request (a class-wide
functools.lru_cache on a Lineage method keeps every instance, and its store, alive for ever)."""

import gc
import weakref

import pytest

from pipeline.lineage.store import Lineage
from pipeline.lineage.web.app import create_app
from tests.support.mlmd import connect

# Pages that go through every cached read of Lineage (contexts, types, events, executions).
PAGES = ("/", "/run/run-a", "/artifact/1", "/artifact/3", "/diff?a=run-a&b=run-c", "/models")


def _live_after(ui_home, requests: int) -> int:
    """Live Lineage objects after `requests` page views (one shared store: only the Lineage
    objects are counted, each tracked by a weak reference)."""
    store = connect(str(ui_home / "metadata.sqlite"))
    made = weakref.WeakSet()

    def open_lineage():
        lin = Lineage(store)
        made.add(lin)
        return lin

    client = create_app(open_lineage, []).test_client()
    for i in range(requests):
        assert client.get(PAGES[i % len(PAGES)]).status_code == 200
    gc.collect()
    return len(made)


def test_no_lineage_outlives_its_request(ui_home):
    """Catches a cache that holds the instance: 300 requests leave 300 live objects then."""
    assert _live_after(ui_home, 300) <= 1


@pytest.mark.slow
def test_memory_stays_flat_over_ten_thousand_requests(ui_home):
    assert _live_after(ui_home, 10_000) <= 1
