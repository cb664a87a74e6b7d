"""bigtrain compiled for other orchestrators: Kubeflow (its container
entrypoint and a local task-by-task runner), Airflow, and the
multi-worker training as Kubernetes, RayJob or TFJob manifests."""
