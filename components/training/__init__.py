"""Training as plain functions (input, strategy, precision, train step, loop, warm start); run_fn.py
is the thin TFX wrapper."""
