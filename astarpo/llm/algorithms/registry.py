"""``ALGORITHMS``: the one registry of Stage 2 algorithms, ``{name: AlgorithmSpec}``.

The CLI (``astarpo train --algo``), the trainer (an algorithm built from its config), the
benchmark and the docs' table all read it. Adding an algorithm means one new module (a frozen
config subclassing :class:`~astarpo.llm.algorithms.train_config.TrainConfig` and a class with the
members of :class:`~astarpo.llm.algorithms.base.Algorithm` plus
``from_config(config, model, ref_model)``) and one line here.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from astarpo.llm.algorithms.astarpo import AStarPO, AStarPOConfig
from astarpo.llm.algorithms.base import Algorithm
from astarpo.llm.algorithms.grpo import GRPO, RLOO, GRPOConfig, RLOOConfig
from astarpo.llm.algorithms.ppo import PPO, PPOConfig
from astarpo.llm.algorithms.rebel import REBEL, REBELConfig
from astarpo.llm.algorithms.train_config import TrainConfig

__all__ = ["ALGORITHMS", "AlgorithmSpec", "build_algorithm", "name_of_config"]


class AlgorithmSpec(NamedTuple):
    """One registered algorithm: ``(config, algorithm, summary)``."""

    config: type[TrainConfig]
    """Its config class (a :class:`~astarpo.llm.algorithms.train_config.TrainConfig` subclass)."""
    algorithm: type[Any]
    """Its class; ``algorithm.from_config(config, model, ref_model)`` builds it."""
    summary: str
    """One line for ``--help`` and the docs."""


ALGORITHMS: dict[str, AlgorithmSpec] = {
    "astarpo": AlgorithmSpec(
        AStarPOConfig, AStarPO, "A*-PO: 1 sample/prompt, regression onto r - V* (needs --v-star)"
    ),
    "grpo": AlgorithmSpec(GRPOConfig, GRPO, "GRPO / Dr.GRPO: group_size samples, group baseline"),
    "rloo": AlgorithmSpec(RLOOConfig, RLOO, "RLOO: group_size samples, leave-one-out baseline"),
    "ppo": AlgorithmSpec(PPOConfig, PPO, "PPO: 1 sample/prompt, critic copied from the reference"),
    "rebel": AlgorithmSpec(
        REBELConfig, REBEL, "REBEL: 2 samples/prompt, reward-difference regression"
    ),
}
"""Every algorithm the trainer, the CLI and the benchmark know, by name."""


def name_of_config(config: TrainConfig) -> str:
    """The registry name whose config class is exactly ``type(config)``.

    Raises:
        TypeError: ``config`` is no registered algorithm's config (a bare ``TrainConfig``
            names no algorithm).
    """
    for name, spec in ALGORITHMS.items():
        if type(config) is spec.config:
            return name
    known = ", ".join(f"{s.config.__name__} ({n})" for n, s in ALGORITHMS.items())
    raise TypeError(
        f"{type(config).__name__} is not the config of a registered algorithm; pass one of "
        f"{known}, or pass algorithm= explicitly."
    )


def build_algorithm(config: TrainConfig, model: Any = None, ref_model: Any = None) -> Algorithm:
    """The algorithm of ``config`` (looked up by its class), built with ``from_config``."""
    spec = ALGORITHMS[name_of_config(config)]
    algorithm: Algorithm = spec.algorithm.from_config(config, model=model, ref_model=ref_model)
    return algorithm
