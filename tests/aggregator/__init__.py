"""Aggregator tests."""
