"""The efficiency benchmark (``astarpo bench``): A*-PO against the baselines in one harness.

``config`` (:class:`~astarpo.llm.bench.config.BenchConfig`, the runs of a seed), ``run`` (the
protocol: reference, hard subset, Stage 1, sweep, runs), ``worker`` (one run in a fresh process,
through the library's own trainer), ``measure`` (peak memory, held-out accuracy and KL),
``stats`` (intervals, time to target, the learning-rate rule) and ``report`` (JSON, Markdown,
plot). May import every other subpackage of :mod:`astarpo.llm`.
"""
