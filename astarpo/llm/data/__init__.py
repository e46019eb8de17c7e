"""Data and rewards: prompt files and templates, reward functions, the math-verify worker and
the killable worker pool that gives every reward a hard timeout.

``prompts`` (reading JSONL/Parquet, templates, prompt keys, ``repeat_columns``), ``rewards``
(math-verify, GSM8K, exact match), ``scoring`` (dotted-path loading and
:func:`~astarpo.llm.data.scoring.compute_rewards`), ``pool``
(:class:`~astarpo.llm.data.pool.KillablePool`) and ``math_verify_worker`` (runs in the pool's
worker processes). May import :mod:`astarpo.llm.parallel`; nothing else of :mod:`astarpo.llm`.
"""
