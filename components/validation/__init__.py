"""Validation: the curated schema, its TFX component, reading anomalies and the gate."""
