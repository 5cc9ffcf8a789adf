"""Assay: evaluate AI research agents."""
