"""The zero-pass study (``python -m experiments.zero_pass``): prompts the reference never solves.

``config`` (the settings, the sets and runs), ``run`` (reference, the hard set with pass@64 = 0,
Stage 1, the runs), ``worker`` (what runs in a process: one run with its success counts and the
log-ratio check, a shard of the hard set's check) and ``report`` (the verdicts, the review's
2x2, the figure).
"""
