"""The Tuner stage: hyper-parameter search (KerasTuner oracles) whose trials run bigtrain's own
training loop, and the TFX component that records every trial in MLMD."""
