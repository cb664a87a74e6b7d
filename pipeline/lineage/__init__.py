"""Lineage from ML Metadata: id- and event-based traversal, queries, rendering."""
