"""The efficiency benchmark (``astarpo bench``): A*-PO against the baselines in one harness.

``config`` (:class:`~astarpo.llm.bench.config.BenchConfig`), ``run`` (one fresh process per
algorithm and seed, through the library's own trainer), ``measure`` (peak memory, held-out
accuracy and KL) and ``report`` (JSON, Markdown, plot). May import every other subpackage of
:mod:`astarpo.llm`.
"""
