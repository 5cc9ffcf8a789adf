"""Benchmarks: figures and ratios against baselines measured in the same run."""

from .table import Row, percentile, print_rows

__all__ = ["Row", "percentile", "print_rows"]
