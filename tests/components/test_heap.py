"""components/common/heap.py: heap_frozen hides the existing heap from the collector and undoes
only its own freeze."""

import gc

from components.common.heap import heap_frozen


def test_heap_frozen_freezes_for_the_block_and_leaves_an_outer_freeze_alone():
    assert gc.get_freeze_count() == 0
    with heap_frozen():
        assert gc.get_freeze_count() > 0
        with heap_frozen():                      # nested: must not unfreeze the outer block
            pass
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    gc.freeze()                                  # the caller's own freeze survives the block
    try:
        with heap_frozen():
            pass
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
