"""TF Serving's request batching for the exported model (--enable_batching
--batching_parameters_file): the Pusher writes these as `batching_parameters` next to the pushed
versions (components/push/deployment.py) and the warm-up records cover every allowed batch size
(components/serving/warmup.py). No TensorFlow import: the Pusher reads it too.

Batches are padded up to the next allowed size. Sized from `benchmarks/generate_speed.py
--batch-sweep` (tiny, greedy, 32 new tokens per row; 2026-11-23, the 2-core dev VM shared by 4
engineers; docs/benchmarks.md#request-batching-batch-size-sweep-issue-19): batch 1 takes ~0.04 s
a request (24 rows/s), batch 32 ~0.17 s (190 rows/s, 8x): throughput still grows from 16 to 32,
latency 4x batch 1, so max 32. The 5 ms timeout is ~12% of a one-row request.
"""

BATCHING = {"max_batch_size": 32, "allowed_batch_sizes": (1, 4, 16, 32), "batch_timeout_micros": 5000,
            "num_batch_threads": 4, "max_enqueued_batches": 100, "pad_variable_length_inputs": True}
