"""The `bigtrain` command line: the parser and its commands (`app.py`, the console
script's entry), shared options (`options.py`), `plumbing` (`plumbing.py`) and
`export hf` (`export.py`)."""
