"""Benchmarks: scripts that time or measure one thing against another in one run and print the
ratios (``python -m experiments.benchmarks.NAME --help``)."""
