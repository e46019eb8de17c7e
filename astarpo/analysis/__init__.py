"""What every measurement of the package shares: statistics, figures and reports.

* :mod:`astarpo.analysis.stats` -- intervals over seeds and bootstrap resamples.
* :mod:`astarpo.analysis.figures` -- figure helpers (matplotlib, imported lazily).

The theory experiments, the LLM studies and the scripts in ``benchmarks/`` all use these; the
library layers below them (``objective``, the bandits, ``llm``) never import them.
"""
