"""A local run in a home, from start to report: the run itself (`run.py`) and what
it needs around it: the home's layout, its lock, logs, metadata store,
interrupts, a full disk, the up-to-date check, trackers and `home:` eval sets."""
