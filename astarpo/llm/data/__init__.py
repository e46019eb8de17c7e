"""Data and rewards: prompt files and templates, reward functions and the math-verify worker.

``prompts`` (reading JSONL/Parquet, templates, prompt keys, ``repeat_columns``), ``rewards``
(math-verify in killable ``pebble`` worker processes, GSM8K, exact match), ``scoring``
(dotted-path loading and :func:`~astarpo.llm.data.scoring.compute_rewards`) and
``math_verify_worker`` (runs in the worker processes). May import :mod:`astarpo.llm.parallel`;
nothing else of :mod:`astarpo.llm`.
"""
