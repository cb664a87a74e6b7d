"""Training as plain functions (input, strategy, precision, train step, loop, export); run_fn.py
is the thin TFX wrapper."""
