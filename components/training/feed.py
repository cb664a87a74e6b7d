"""The training loop's input: this worker's per-replica batches (input.py's rule), prefetched to
its replicas' devices, with the iterator's state saved beside every checkpoint.

TF 2.16 cannot checkpoint a distributed iterator (`tf.train.Checkpoint(iterator=...)` raises
"expecting a trackable object"), but it can checkpoint a plain one. So each worker keeps a plain
iterator over its own per-replica batches, the *source* (input.worker_batches), and the strategy
deals them to its replicas through one distributed dataset that pulls from it and prefetches to
the devices (distribute_datasets_from_function). Prefetching runs ahead of training, and the
source's state must match the trained steps when it is saved, so every pull first takes a ticket
from a queue: the loop releases the tickets of the steps up to the next checkpoint step only
(`release`). When that step's checkpoint is written, its batches are all consumed and no pull is
in flight (the puller waits for a ticket), so the source's state is exactly "after step n". It
goes beside the worker's checkpoints (components/storage/checkpoints.py owns that layout), each
worker its own.
(A new distributed iterator per checkpoint would do the same without tickets, but each one costs
~0.2 s of tracing here and, retraced hundreds of times, multi-second garbage collections.)

Resume at step n restores that state when it was saved for the same input (the layout: files,
streams, batch, sequence length, shuffle, seed, replicas, workers, this worker's id): nothing is
read again. Otherwise (another cluster shape, no state for step n, train.cache_dataset=true,
whose state would carry the cache) the source reads forward n x m records per stream: exact too,
since the rule does not depend on the shape, but linear in n (benchmarks/resume_skip.py).
"""

from __future__ import annotations

import json
import logging

import tensorflow as tf

from components.storage import checkpoints, fs
from components.training import input as input_lib

LOGGER = logging.getLogger("bigtrain.train")
STOP = -1   # the ticket that ends the puller's dataset


class InputFeed:
    """with InputFeed(..., start_step) as feed: per segment, feed.release(steps), then `steps` x
    next(feed.iterator); after the segment's checkpoint, feed.save(step, kept)."""

    def __init__(self, strategy, file_patterns, config, checkpoint_dir: str, start_step: int = 0,
                 start_position: int | None = None):
        """start_position: the global batches read before start_step's (default start_step; more
        after spike rollbacks skipped batches), where a source with no saved state reads on to."""
        self.checkpoint_dir, self.cache = checkpoint_dir, config.train.cache_dataset
        position = start_step if start_position is None else start_position
        # The last point whose source state is reproducible: (step, input position).
        self.reproducible = (start_step, position)
        plan = input_lib.plan(file_patterns, config.train.global_batch_size,
                              config.train.input_streams)
        self.tickets = tf.queue.FIFOQueue(2**30, dtypes=[tf.int64], shapes=[[]])
        self.closed, opened, tickets = False, {}, self.tickets
        # The dataset function refers to no part of self, so the feed is in no reference cycle:
        # it is closed (__del__) before its queue and iterator go, never after.

        def replica_batches(context):       # called once per worker, with its InputContext
            layout = layout_of(plan, config, context)
            source = open_source(plan, config, context, start_step,
                                 checkpoints.input_state_prefix(checkpoint_dir, layout, start_step),
                                 position)
            opened.update(source=source, layout=layout, context=context,
                          local=context.num_replicas_in_sync // context.num_input_pipelines)
            # A ticket per pull; STOP ends the dataset cleanly (a closed queue would make every
            # further pull an error, and the puller would retry for ever).
            return (tf.data.Dataset.range(2**62).map(lambda _: tickets.dequeue())
                    .take_while(lambda ticket: ticket != STOP).map(lambda _: source.get_next()))
        self.iterator = iter(strategy.distribute_datasets_from_function(replica_batches))
        self.source, self.layout, self.local_replicas = (opened["source"], opened["layout"],
                                                         opened["local"])
        self.plan, self.config, self.context = plan, config, opened["context"]

    def release(self, steps: int) -> None:
        """Let the input run `steps` more steps ahead (up to the next checkpoint step)."""
        self.tickets.enqueue_many([tf.zeros([steps * self.local_replicas], tf.int64)])

    def save(self, step: int, kept_checkpoints: list[str], position: int | None = None) -> None:
        """Save the source's state after `step` (every released step consumed; `position`: the
        global batches read by then, default step); drop the states of steps whose checkpoints
        the CheckpointManager no longer keeps."""
        self.reproducible = (step, step if position is None else position)
        self._write(self.source, step, kept_checkpoints)

    def save_between(self, step: int, position: int, kept_checkpoints: list[str]) -> None:
        """Save the state after `step` when the input may have run ahead of it (a preemption
        between checkpoints: the released steps reach the next checkpoint step). The state is
        rebuilt: a second source opened where the last saved state (or the opening) stands,
        advanced to `position`. Costs reading at most checkpoint_every - 1 steps of input."""
        if self.cache:
            return
        base_step, base_position = self.reproducible
        source = open_source(self.plan, self.config, self.context, base_step,
                             checkpoints.input_state_prefix(self.checkpoint_dir, self.layout,
                                                            base_step), base_position)
        for _ in range((position - base_position) * self.local_replicas):
            source.get_next()
        self.reproducible = (step, position)
        self._write(source, step, kept_checkpoints)

    def _write(self, source, step: int, kept_checkpoints: list[str]) -> None:
        if self.cache:  # the state would hold the cache: a resume reads forward instead
            return
        tf.train.Checkpoint(input=source).write(
            checkpoints.input_state_prefix(self.checkpoint_dir, self.layout, step))
        checkpoints.prune_input_states(self.checkpoint_dir, self.layout,
                                       {checkpoints.step_of(kept) for kept in kept_checkpoints})

    def close(self) -> None:
        """End the puller (it sees the end of its dataset after the released batches).
        Destroying the distributed iterator while the puller waits for a ticket crashes the
        process (TF 2.16: segmentation fault, reproduced), so a feed is closed on exit from
        `with` and, failing that, when it is collected."""
        if not self.closed:
            self.closed = True
            self.tickets.enqueue([tf.constant(STOP, tf.int64)])

    def __del__(self) -> None:
        if getattr(self, "tickets", None) is not None:
            self.close()

    def __enter__(self) -> "InputFeed":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_source(plan, config, context, start_step: int, state: str, position: int | None = None):
    """This worker's plain iterator at start_step: restored from `state` when it exists, else
    reading forward `position` global batches (default start_step)."""
    position = start_step if position is None else position
    data, t = config.data, config.train
    share = input_lib.worker_share(t.global_batch_size, plan.streams,
                                   context.num_input_pipelines, context.input_pipeline_id)
    LOGGER.info("input: %d stream(s) over %d train file(s), %d rows each per step; this worker "
                "(%d of %d) reads streams %d-%d", plan.streams, len(plan.files),
                t.global_batch_size // plan.streams, context.input_pipeline_id + 1,
                context.num_input_pipelines, share.first, share.stop - 1)
    restore = bool(start_step) and not t.cache_dataset and fs.exists(state + ".index")
    source = iter(input_lib.worker_batches(
        plan, data.seq_len, t.global_batch_size, context, start_step=0 if restore else position,
        shuffle_buffer=t.shuffle_buffer, seed=t.seed, cache=t.cache_dataset))
    if restore:
        tf.train.Checkpoint(input=source).read(state).assert_consumed()
        LOGGER.info("input: restored the iterator saved at step %d", start_step)
    elif position:
        LOGGER.info("input: %s: reading forward %d steps to the resume point",
                    "train.cache_dataset=true keeps no iterator state" if t.cache_dataset else
                    f"no iterator state saved at step {start_step} for this layout", position)
    return source


def layout_of(plan, config, context) -> str:
    """What the source's state depends on: a state saved under another layout is not used."""
    t = config.train
    return json.dumps({
        "files": list(plan.files), "streams": plan.streams,
        "global_batch_size": t.global_batch_size, "seq_len": config.data.seq_len,
        "shuffle_buffer": t.shuffle_buffer, "seed": t.seed,
        "replicas": context.num_replicas_in_sync, "workers": context.num_input_pipelines,
        "worker": context.input_pipeline_id}, sort_keys=True)

