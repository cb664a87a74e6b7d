# The image every Kubeflow step runs in. Same lock, same set-up command as the README
# (`make setup`), so the cluster runs exactly what the tests ran. Not built in CI (no Docker
# engine there); build with: docker build -t <registry>/bigtrain:<tag> .
FROM python:3.11-slim-bookworm
RUN apt-get update \
    && apt-get install -y --no-install-recommends make git \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/bigtrain
COPY . .
RUN make setup PYTHON=python3.11
# KFP starts steps as `python -m tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor`:
# the venv's python comes first on PATH.
ENV PATH=/opt/bigtrain/.venv/bin:$PATH
ENTRYPOINT []
