"""The training loop's input feed (issue 20 item 1, components/training/feed.py): per-replica
shares prefetched to each replica's device, pulled only up to the released (checkpoint) step,
and the iterator's state saved per worker so a resume reads nothing again.

Mutations these catch: pulls not gated by tickets, or the ticket not a control dependency of the
pull (the source then runs ahead of the trained steps and the saved state skips batches: the
resume test), a restore that ignores the state (it starts from step 0), a state used for another
layout (another replica count: its rows are another share), the reading-forward path taken when
a state exists (its log), states of pruned checkpoints left behind."""

import logging
import os

import pytest

from components.training import feed as feed_lib
from components.training import input as input_lib
from components.training.strategy import make_strategy
from tests.training.conftest import tiny_config
from tests.support.input_streams import BATCH, SEED, SEQ_LEN, rows, write_files


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_files(tmp_path_factory.mktemp("feed"), [20] * 4)


def config(*overrides):
    return tiny_config(f"data.seq_len={SEQ_LEN}", f"train.global_batch_size={BATCH}",
                       "train.shuffle_buffer=16", f"train.seed={SEED}", "train.input_streams=4",
                       *overrides)


def reference(files, steps):
    dataset = input_lib.make_dataset(files, SEQ_LEN, BATCH, streams=4, shuffle_buffer=16, seed=SEED)
    return [rows(x.numpy()) for x, _ in dataset.take(steps)]


def take(strategy, feed, count):
    """Release and take `count` steps: each step's rows in replica order, and the devices the
    shares sit on. Then the gate, without a clock: every ticket released was taken (each pull
    takes one, so the puller read exactly the steps released and waits for the next ticket; a
    puller that did not take tickets would leave them queued). The old check slept 0.2 s for an
    ungated puller to run ahead, which a loaded VM could outlast."""
    feed.release(count)
    steps, devices = [], set()
    for _ in range(count):
        inputs, _ = next(feed.iterator)
        shares = strategy.experimental_local_results(inputs)
        devices |= {x.device for x in shares}
        steps.append(sum((rows(x.numpy()) for x in shares), []))
    assert int(feed.tickets.size()) == 0
    return steps, devices


def run_and_save(strategy, files, cfg, folder, steps):
    """A feed from step 0 takes `steps` steps, saves its state as checkpoint `steps`'s, closes."""
    feed = feed_lib.InputFeed(strategy, files, cfg, str(folder))
    take(strategy, feed, steps)
    feed.save(steps, [str(folder / f"ckpt-{steps}")])
    feed.close()


def resume(strategy, files, cfg, folder, start, count, caplog):
    """A feed resumed at `start` takes `count` steps; returns their rows (its log in caplog)."""
    with caplog.at_level(logging.INFO, logger="bigtrain.train"):
        resumed = feed_lib.InputFeed(strategy, files, cfg, str(folder), start_step=start)
        steps, _ = take(strategy, resumed, count)
    resumed.close()
    return steps


def test_each_replica_gets_its_share_on_its_device(files, tmp_path):
    mirrored = config("runtime.strategy=mirrored", "runtime.cpu_replicas=2")
    strategy = make_strategy(mirrored.runtime)
    feed = feed_lib.InputFeed(strategy, files, mirrored, str(tmp_path))
    first, devices = take(strategy, feed, 3)
    second, _ = take(strategy, feed, 4)
    feed.close()
    assert first + second == reference(files, 7)
    assert len(devices) == 2                       # each share already on its replica's device


@pytest.mark.parametrize("strategy_name", ["one_device", "mirrored"])
def test_resume_restores_the_saved_iterator_and_reads_nothing_again(files, tmp_path, caplog,
                                                                     strategy_name):
    """Steps 1-4 then save (its segment used up); a new feed at step 4 restores the state and
    continues with the uninterrupted run's steps 5-9, without the reading-forward path."""
    cfg = config(f"runtime.strategy={strategy_name}", "runtime.cpu_replicas=2")
    strategy = make_strategy(cfg.runtime)
    run_and_save(strategy, files, cfg, tmp_path, 4)
    steps = resume(strategy, files, cfg, tmp_path, 4, 5, caplog)
    assert steps == reference(files, 9)[4:]
    assert "restored the iterator saved at step 4" in caplog.text
    assert "reading forward" not in caplog.text


def test_a_state_saved_for_another_layout_is_not_used(files, tmp_path, caplog):
    """Saved on 2 replicas, resumed on 1 device: the state is another share's; the feed reads
    forward instead, to the same batches (the rule does not depend on the shape)."""
    mirrored, single = config("runtime.strategy=mirrored", "runtime.cpu_replicas=2"), config()
    strategy = make_strategy(mirrored.runtime)
    run_and_save(strategy, files, mirrored, tmp_path, 3)
    steps = resume(make_strategy(single.runtime), files, single, tmp_path, 3, 3, caplog)
    assert steps == reference(files, 6)[3:]
    assert "no iterator state saved at step 3 for this layout: reading forward 3 steps" in caplog.text


def test_cache_dataset_saves_no_state_and_resumes_by_reading_forward(files, tmp_path, caplog):
    cached = config("train.cache_dataset=true")
    strategy = make_strategy(cached.runtime)
    run_and_save(strategy, files, cached, tmp_path, 2)
    assert not [name for name in os.listdir(tmp_path) if name.startswith("input-")]
    steps = resume(strategy, files, cached, tmp_path, 2, 3, caplog)
    assert steps == reference(files, 5)[2:]
    assert "train.cache_dataset=true keeps no iterator state" in caplog.text


def test_states_follow_the_checkpoints_kept(files, tmp_path):
    cfg = config()
    strategy = make_strategy(cfg.runtime)
    feed = feed_lib.InputFeed(strategy, files, cfg, str(tmp_path))
    kept = []
    for stop in (2, 4, 6):
        take(strategy, feed, 2)
        kept = (kept + [str(tmp_path / f"ckpt-{stop}")])[-2:]
        feed.save(stop, kept)
    feed.close()
    (folder,) = [tmp_path / n for n in os.listdir(tmp_path) if n.startswith("input-")]
    assert sorted({name.split(".")[0] for name in os.listdir(folder)}) == ["state-4", "state-6"]
