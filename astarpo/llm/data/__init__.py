"""Data and rewards: prompt files and templates, reward functions, the math-verify worker and
the killable worker pool that gives every reward a hard timeout.

``prompts`` (reading JSONL/Parquet, templates, prompt keys), ``rewards`` (math-verify, GSM8K,
exact match, dotted-path loading, :func:`~astarpo.llm.data.rewards.compute_rewards`), ``pool``
(:class:`~astarpo.llm.data.pool.KillablePool`) and ``math_verify_worker`` (runs in the pool's
worker processes). Imports nothing else of :mod:`astarpo.llm`.
"""
