# Set-up is one idempotent step: create .venv if absent, install the committed lock exactly
# (no dependency resolution at install time), install bigtrain itself. A warm re-run takes seconds.
PYTHON ?= python3.11
VENV   ?= .venv
UV_VERSION := 0.13.9
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.bigtrain-installed-bytecode
# Extra arguments: make run ARGS="--set train.train_steps=50"; make test PYTEST_ARGS="-m 'not slow'"
ARGS ?=
PYTEST_ARGS ?=
# Both test tiers run one worker per core (pytest-xdist), tests grouped so a shared pipeline run
# or export is built once (tests/conftest.py), the slowest groups first. Until 2026-12-07 `make
# test` ran one worker more than the cores, to fill the slow tier's waits; on the 2-core AMD VM
# that day two workers used 9% fewer CPU-s (one less worker's imports and session server, no
# third process on 2 cores) for 6% more wall (docs/benchmarks.md, "Set-up and tests").
# One process instead: make test XDIST= (or make test-fast XDIST=)
XDIST ?= -n auto --dist loadgroup --no-loadscope-reorder
# pytest with bytecode writing on, whatever PYTHONDONTWRITEBYTECODE says (it is set in CI and on
# the dev VM): pytest then keeps its assertion-rewritten test modules in tests/**/__pycache__
# (git-ignored) instead of rewriting all ~300 of them in every worker on every run, ~10 CPU-s
# per worker (collection 23.5 -> 13.7 s in one process, 2026-11-28); the project's own modules are
# compiled once too, for every process the tests start.
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest

.PHONY: setup run test test-fast services lock bench clean-home mariadb mariadb-stop objectstore objectstore-stop \
        objectstore-lock browser \
        hf-loader hf-loader-lock mlflow mlflow-stop mlflow-lock ray ray-stop dask dask-stop

setup: $(STAMP)

# Bytecode is compiled once here (~45 s): with PYTHONDONTWRITEBYTECODE set (as in CI and this VM)
# every process would otherwise compile TF/TFX from source: 21 -> 8.5 s CPU per import.
$(STAMP): requirements.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (Python 3.11) on PATH"; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
	  || { echo "$(PYTHON) is not Python 3.11"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -x $(BIN)/uv || $(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip sync --python $(BIN)/python --quiet --compile-bytecode requirements.lock
	$(BIN)/uv pip install --python $(BIN)/python --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

# The main job: the pipeline on the embedded default data (the interpreter's standard library).
run: setup
	$(BIN)/bigtrain run $(ARGS)

# The test suite (CI runs exactly this through .ci/run): the services first (below), then both
# tiers. Every run writes the cost ledger, build/test-ledger.json (CPU and wall seconds per test,
# pipeline runs, SavedModel exports and TensorFlow processes per xdist group), prints the 25
# most expensive tests, and fails if a group exceeds its caps in tests/suite_budget.json
# (tests/support/ledger.py; docs/operations.md#test-tiers).
test: setup services
	$(PYTEST) $(XDIST) --ledger-whole --durations=25 $(PYTEST_ARGS)

# The services of the suite, each idempotent (.ci/run times them one by one): a private MariaDB,
# for the MySQL metadata tests, a private S3 server, for the object-storage tests, headless
# Chromium, for the browser tests of `bigtrain ui`, PyTorch + transformers, the second loader
# of the Hugging Face export tests, an MLflow tracking server, for the tracking tests, a Ray
# cluster, for the Trainer on Ray (runtime.cluster=ray), and a Dask cluster, for the data stage on
# Beam's DaskRunner.
SERVICES := mariadb objectstore browser hf-loader mlflow ray dask
# Their fixed ports lie below Linux's ephemeral range (32768-60999): there, an outgoing connection
# of an earlier service (a Dask worker's to its scheduler, seen 2026-12-07) may hold the port a
# later one binds ("Address already in use" with nothing listening on it).
services: $(SERVICES)

# MariaDB from Debian's packages (apt-get, if absent), started on 127.0.0.1:$(MARIADB_PORT) with
# its own datadir under build/mariadb/; idempotent. Outside CI, if it cannot be installed, the
# MySQL tests skip naming the reason (build/mariadb/unavailable); in CI that is an error.
MARIADB_PORT ?= 23306
mariadb:
	BIGTRAIN_MARIADB_PORT=$(MARIADB_PORT) bash tests/support/mariadb.sh start

mariadb-stop:
	bash tests/support/mariadb.sh stop

# An S3-protocol server (moto's standalone server, in its own venv under build/objectstore/: it
# needs Flask 3, which is not in the lock; that venv is installed from its own hashed lock,
# tests/support/objectstore.lock) on 127.0.0.1:$(OBJECTSTORE_PORT) with one bucket; idempotent. Writes build/objectstore/env.sh (source it for a shell). Outside CI, if it cannot be
# installed, the S3 tests skip naming the reason (build/objectstore/unavailable); in CI: an error.
OBJECTSTORE_PORT ?= 29000
objectstore:
	BIGTRAIN_OBJECTSTORE_PORT=$(OBJECTSTORE_PORT) PYTHON=$(PYTHON) UV=$(abspath $(BIN)/uv) bash tests/support/objectstore.sh start

objectstore-stop:
	bash tests/support/objectstore.sh stop

# Re-resolve the S3 server's lock after changing tests/support/objectstore.in; commit both.
objectstore-lock:
	test -x $(BIN)/uv || { $(PYTHON) -m venv $(VENV) && $(BIN)/python -m pip install --quiet uv==$(UV_VERSION); }
	$(BIN)/uv pip compile tests/support/objectstore.in --python-version 3.11 \
	  --python-platform x86_64-manylinux_2_36 --index-url https://pypi.org/simple --generate-hashes \
	  -o tests/support/objectstore.lock

# An MLflow tracking server (the full `mlflow` package, in its own venv under build/mlflow/: its
# server's dependencies are not in the lock, which carries the client mlflow-skinny; installed
# from its own hashed lock, tests/support/mlflow.lock) on 127.0.0.1:$(MLFLOW_PORT) with a sqlite
# store under build/mlflow/; idempotent. Writes build/mlflow/env.sh. Outside CI, if it cannot be
# installed, the tracking server tests skip naming the reason (build/mlflow/unavailable); in CI:
# an error.
MLFLOW_PORT ?= 29100
mlflow:
	BIGTRAIN_MLFLOW_PORT=$(MLFLOW_PORT) PYTHON=$(PYTHON) UV=$(abspath $(BIN)/uv) bash tests/support/mlflow.sh start

mlflow-stop:
	bash tests/support/mlflow.sh stop

# A Dask scheduler on 127.0.0.1:$(DASK_PORT) and 2 worker processes, from the project's venv
# (distributed comes with apache-beam[dask]); pid files and logs under build/dask/; idempotent.
# Writes build/dask/env.sh (BIGTRAIN_DASK_ADDRESS). The workers import bigtrain when they start:
# after changing the data stage's code, `make dask-stop dask`. Outside CI, if it cannot start,
# the Dask tests skip naming the reason (build/dask/unavailable); in CI: an error.
DASK_PORT ?= 28786
dask: setup
	BIGTRAIN_DASK_PORT=$(DASK_PORT) BIGTRAIN_DASK_PYTHON=$(abspath $(BIN)/python) bash tests/support/dask.sh start

dask-stop:
	bash tests/support/dask.sh stop

# Re-resolve the MLflow server's lock after changing tests/support/mlflow.in; commit both.
mlflow-lock:
	test -x $(BIN)/uv || { $(PYTHON) -m venv $(VENV) && $(BIN)/python -m pip install --quiet uv==$(UV_VERSION); }
	$(BIN)/uv pip compile tests/support/mlflow.in --python-version 3.11 \
	  --python-platform x86_64-manylinux_2_36 --index-url https://pypi.org/simple --generate-hashes \
	  -o tests/support/mlflow.lock

# A Ray cluster on loopback: a head (127.0.0.1:$(RAY_PORT)) and one worker node, separate
# processes, $(RAY_CPUS) CPUs each, from the venv's ray (the lock's ray[train]); temp and session
# folders under build/ray/; idempotent. Writes build/ray/env.sh. ray-stop ends only this
# cluster's processes. Outside CI, if it cannot start, the Ray tests skip naming the reason
# (build/ray/unavailable); in CI: an error.
RAY_PORT ?= 29200
RAY_CPUS ?= 2
ray: setup
	BIGTRAIN_RAY_PORT=$(RAY_PORT) BIGTRAIN_RAY_CPUS=$(RAY_CPUS) bash tests/support/ray.sh start

ray-stop:
	bash tests/support/ray.sh stop

# Headless Chromium and chromedriver from Debian's packages (apt-get, if absent) for the browser
# tests of `bigtrain ui` (tests/ui/test_browser.py); idempotent. Outside CI, if they cannot be
# installed, those tests skip naming the reason (build/browser/unavailable); in CI that is an error.
browser:
	bash tests/support/browser.sh

# PyTorch (the CPU wheel on this machine's disk, /opt/wheels; never PyPI's multi-GB CUDA build) and
# transformers in their own venv, build/hfloader/venv, installed with plain pip from their own
# hashed lock, tests/support/hfloader.lock; idempotent (rebuilt when the lock changes). The tests
# of tests/export/test_hf_transformers.py run that venv's python. Without the CPU wheel it writes
# build/hfloader/unavailable with the reason and those tests skip naming it.
hf-loader:
	PYTHON=$(PYTHON) UV=$(abspath $(BIN)/uv) bash tests/support/hfloader.sh

# Re-resolve the loader's lock after changing tests/support/hfloader.in; commit both.
hf-loader-lock:
	test -x $(BIN)/uv || { $(PYTHON) -m venv $(VENV) && $(BIN)/python -m pip install --quiet uv==$(UV_VERSION); }
	$(BIN)/uv pip compile tests/support/hfloader.in --python-version 3.11 \
	  --python-platform x86_64-manylinux_2_36 --index-url https://pypi.org/simple \
	  --find-links /opt/wheels --generate-hashes -o tests/support/hfloader.lock

# Inner loop (target: at most 3 minutes on the 2-core dev VM; latest figures in docs/operations.md):
# every package's unit tests, none of the pipeline runs or trainings marked slow.
test-fast: setup
	$(PYTEST) $(XDIST) --ledger-whole -m "not slow" $(PYTEST_ARGS)

# Re-resolve the lock after changing pyproject.toml's dependencies; commit the result.
lock:
	test -x $(BIN)/uv || { $(PYTHON) -m venv $(VENV) && $(BIN)/python -m pip install --quiet uv==$(UV_VERSION); }
	$(BIN)/uv pip compile pyproject.toml --python-version 3.11 \
	  --python-platform x86_64-manylinux_2_36 --index-url https://pypi.org/simple \
	  -o requirements.lock

bench: setup
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

clean-home:
	rm -rf bigtrain_home
