"""Push: atomic, idempotent copy of a blessed SavedModel into a TF Serving layout."""
