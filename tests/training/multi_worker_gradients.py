"""One worker of test_gradients.test_two_workers_match_reference (run as a module, TF_CONFIG set):
the train step's pre-clip gradient of a fixed global batch under MultiWorkerMirroredStrategy.
argv: input npz (ids, weights arr_0..), output npz (loss, arr_0.. gradients)."""

import sys

import numpy as np


def main(in_path: str, out_path: str) -> None:
    from components.tokenizer.byte_level import PAD_ID
    from components.training.strategy import make_strategy
    from tests.training.conftest import tiny_config
    config = tiny_config("runtime.strategy=multi_worker_mirrored", "train.accumulation_steps=2")
    strategy = make_strategy(config.runtime)   # first: collectives start before other TF ops
    import tensorflow as tf

    from components.training import loop, train_step
    data = np.load(in_path)
    model, state, _, _ = loop.build_training(config, strategy)
    model.set_weights([data[f"arr_{i}"] for i in range(len(model.get_weights()))])
    fn = train_step.make_gradient_fn(model, strategy, state, global_batch_size=16,
                                     accumulation_steps=2, dynamic_loss_scale=False,
                                     pad_id=PAD_ID)

    @tf.function
    def run(inputs, targets):
        loss, grads, _ = strategy.run(fn, args=(inputs, targets))
        first = lambda r: strategy.experimental_local_results(r)[0]
        return first(loss), [first(g) for g in grads]

    ids = data["ids"]
    loss, grads = run(tf.constant(ids[:, :-1]), tf.constant(ids[:, 1:]))
    assert strategy.num_replicas_in_sync == 2
    np.savez(out_path, *[g.numpy() for g in grads], loss=loss.numpy())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
