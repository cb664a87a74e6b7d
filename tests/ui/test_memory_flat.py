"""The UI opens a Lineage per request: none may outlive its request (a class-wide
functools.lru_cache on a Lineage method keeps every instance, and its store, alive for ever)."""

import gc
import weakref

import pytest

from pipeline.lineage.store import Lineage
from pipeline.lineage.web.app import create_app
from benchmarks.support.mlmd import connect

# Pages that go through every cached read of Lineage (contexts, types, events, executions).
PAGES = ("/", "/run/run-a", "/artifact/1", "/artifact/3", "/diff?a=run-a&b=run-c", "/models")


def _live_after(ui_home, requests: int, pages=PAGES, status: int = 200) -> int:
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
        assert client.get(pages[i % len(pages)]).status_code == status
    gc.collect()
    return len(made)


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
def test_no_lineage_outlives_its_request(ui_home):
    """Catches a cache that holds the instance: 300 requests leave 300 live objects then."""
    assert _live_after(ui_home, 300) <= 1


@pytest.mark.slow
def test_memory_stays_flat_over_ten_thousand_requests(ui_home):
    """10,000 requests on the cheapest page that opens a Lineage and reads through its per-instance
    cache: an execution's page (a redirect to its run: the execution, then its contexts, a cached
    read), ~1 ms a request where the pages above take 6-18 ms (124 s for 10,000 on the 2-core AMD
    VM, 2026-11-27). Every cached read's page is the 300-request test's. Each execution id in turn,
    so the cache is read with other arguments as a class-wide cache would store them."""
    ids = [e.id for e in connect(str(ui_home / "metadata.sqlite")).get_executions()]
    lin = Lineage(connect(str(ui_home / "metadata.sqlite")))
    pages = [f"/execution/{i}" for i in ids if lin.runs_of_execution(i)]
    assert len(pages) >= 5, pages
    assert _live_after(ui_home, 10_000, pages, status=302) <= 1
