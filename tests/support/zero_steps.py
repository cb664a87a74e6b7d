"""Training steps with and without sharded optimizer state (ZeRO), for comparing their weights."""

import keras

from components.tokenizer.byte_level import PAD_ID
from components.training import input as input_lib
from components.training import loop
from components.training.strategy import make_strategy
from components.training.train_step import make_train_step
from tests.training.conftest import SEQ_LEN


def run_steps(config, shards, steps: int, prepare_model=None, overflow_first=False):
    """(final weights, every replica's copy of them, optimizer) after `steps` optimizer steps.
    overflow_first: the first step's loss scale overflows float16 (a skipped step)."""
    strategy = make_strategy(config.runtime)
    keras.utils.set_random_seed(config.train.seed)
    model, state, optimizer, _ = loop.build_training(config, strategy, prepare_model)
    t = config.train
    dynamic = config.runtime.precision == "mixed_float16"
    step = make_train_step(model, optimizer, strategy, state, global_batch_size=t.global_batch_size,
                           accumulation_steps=t.accumulation_steps,
                           clip_norm=t.clip_norm, dynamic_loss_scale=dynamic, seed=t.seed,
                           pad_id=PAD_ID)
    iterator = iter(input_lib.make_dataset(shards["train"], SEQ_LEN, t.global_batch_size,
                                           shuffle_buffer=0))
    for index in range(steps):
        if overflow_first:             # float16 gradients overflow, then a sane scale
            state.loss_scale.assign(3e38 if index == 0 else 2.0**10)
        _, _, finite = step(iterator)
        assert bool(finite) != (overflow_first and index == 0)
    copies = [[c.numpy() for c in strategy.experimental_local_results(v.value)]
              for v in model.trainable_variables]
    return model.get_weights(), copies, optimizer
