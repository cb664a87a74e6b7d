"""Serving: the exported SavedModel and its signatures (export, server), the quantized variants
and the one rule of their fitness to serve, warm-up requests, request batching, and the LM
metrics both the Trainer and the Evaluator measure with. Below training, evaluation and push."""
