"""Evaluation of the exported SavedModel and the blessing decision (plain functions + component)."""
