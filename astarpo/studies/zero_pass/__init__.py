"""The zero-pass study (``astarpo study zero-pass``): prompts the reference never solves.

``config`` (the settings, the sets and runs), ``sets`` (the hard set with pass@64 = 0), ``run``
(reference, sets, Stage 1, the runs), ``worker`` (one run: success counts, the log-ratio check)
and ``report`` (the verdicts, the review's 2x2, the figure).
"""
