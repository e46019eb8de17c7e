"""Rewards: the built-in reward functions, scoring a batch, and the math-verify worker pool.

``builtin`` (TRL's reward signature, the ``RewardReport`` side channel, GSM8K, exact match),
``math_verify`` (math-verify in killable ``pebble`` worker processes), ``math_verify_pool``
(the helper process that runs that pool), ``math_verify_worker`` (runs in the workers),
``scratchpad`` (the worked-solution format and its exact reward) and ``scoring`` (loading by
name or dotted path, :func:`~astarpo.llm.rewards.scoring.compute_rewards` with the reward
deadline). May import :mod:`astarpo.llm.data` and below.
"""
