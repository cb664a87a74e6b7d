"""TF Serving's request batching for the exported model (--enable_batching
--batching_parameters_file): the Pusher writes these as `batching_parameters` next to the pushed
versions (components/push/deployment.py) and the warm-up records cover every allowed batch size
(components/training/warmup.py). No TensorFlow import: the Pusher reads it too.

Batches are padded up to the next allowed size. max 32: the largest batch
benchmarks/generate_speed.py measures (its staggered case); a 5 ms timeout waits for company
without adding noticeably to a decode, which takes tens of milliseconds and more even at tiny.
"""

BATCHING = {"max_batch_size": 32, "allowed_batch_sizes": (1, 4, 16, 32), "batch_timeout_micros": 5000,
            "num_batch_threads": 4, "max_enqueued_batches": 100, "pad_variable_length_inputs": True}
