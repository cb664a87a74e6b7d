"""Fixtures that benchmarks and tests share: synthetic MLMD stores (`lineage_store`,
`shared_store`) and single-process references of the Beam stages (`single_process`). Benchmarks
ship beside the product and may not import `tests/`; tests may import these (tests/test_layers.py:
product <- benchmarks <- tests)."""
