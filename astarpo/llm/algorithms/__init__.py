"""The Stage 2 algorithms: the :class:`~astarpo.llm.algorithms.base.Algorithm` protocol and
its batch, the pure losses, A*-PO and the baselines, and ``ALGORITHMS``, the one registry.

``base`` (``Algorithm``, ``RolloutBatch``), ``train_config`` (``TrainConfig``, the loop fields
every algorithm config extends), ``config`` (field helpers and checks), ``losses`` and ``gae``
(pure functions), one module per algorithm with its config class (``astarpo``, ``grpo`` with
RLOO, ``rebel``, ``ppo`` with its critic) and ``registry``. May import :mod:`astarpo.objective`
and the subpackages below it (models, rollout, ...); never the trainer.
"""
