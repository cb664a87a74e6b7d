"""The Beam side of a run: what the workers are sent (`staging.py`) and an external
SDK worker pool probed (`sdk_workers.py`) and watched (`sdk_stall.py`)."""
