r"""Named trainers over the registry: ``AStarPOTrainer``, ``GRPOTrainer``, ``RLOOTrainer``,
``PPOTrainer`` and ``REBELTrainer``.

Each is :class:`~astarpo.llm.training.trainer.Trainer` with its algorithm fixed: ``args``
defaults to the algorithm's config and must be one, and the algorithm is built from it through
:data:`~astarpo.llm.algorithms.registry.ALGORITHMS`. They exist because TRL users look for
``GRPOTrainer``-style names; ``Trainer(model, ref, rewards, args=GRPOConfig(...))`` is the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from astarpo.llm.algorithms.registry import ALGORITHMS
from astarpo.llm.algorithms.train_config import TrainConfig
from astarpo.llm.training.trainer import Trainer

__all__ = ["AStarPOTrainer", "GRPOTrainer", "PPOTrainer", "REBELTrainer", "RLOOTrainer"]


class _NamedTrainer(Trainer):
    """The :class:`Trainer` of the registry's algorithm :attr:`algorithm_name`."""

    algorithm_name: ClassVar[str]

    def __init__(
        self,
        model: Any,
        ref_model: Any = None,
        reward_funcs: Sequence[Callable[..., Any]] = (),
        *,
        args: TrainConfig | None = None,
        **kwargs: Any,
    ) -> None:
        config_type = ALGORITHMS[self.algorithm_name].config
        if args is None:
            args = config_type()
        if type(args) is not config_type:
            raise TypeError(
                f"{type(self).__name__} needs args={config_type.__name__}(...), got "
                f"{type(args).__name__}."
            )
        super().__init__(model, ref_model, reward_funcs, args=args, **kwargs)


class AStarPOTrainer(_NamedTrainer):
    """Stage 2 of A*-PO: :class:`Trainer` with :class:`~astarpo.llm.algorithms.astarpo.AStarPO`
    (one sample per prompt, loss :func:`astarpo.advantage_regression_loss`).

    Takes the arguments of :class:`Trainer`; ``args`` is an
    :class:`~astarpo.llm.algorithms.astarpo.AStarPOConfig` (default ``AStarPOConfig()``).

    Example:
        >>> trainer = AStarPOTrainer(model, ref_model, [exact_match_reward],  # doctest: +SKIP
        ...     args=AStarPOConfig(beta2=1e-3), train_dataset=rows, v_star_table=table,
        ...     tokenizer=tokenizer)
        >>> trainer.train()  # doctest: +SKIP
    """

    algorithm_name = "astarpo"


class GRPOTrainer(_NamedTrainer):
    """:class:`Trainer` with :class:`~astarpo.llm.algorithms.grpo.GRPO` (or Dr.GRPO); ``args``
    is a :class:`~astarpo.llm.algorithms.grpo.GRPOConfig`; ``ref_model`` may be ``None`` when
    ``kl_coef == 0``.

    Example:
        >>> trainer = GRPOTrainer(model, None, [exact_match_reward],  # doctest: +SKIP
        ...     args=GRPOConfig(group_size=8), train_dataset=rows, tokenizer=tokenizer)
        >>> trainer.train()  # doctest: +SKIP
    """

    algorithm_name = "grpo"


class RLOOTrainer(_NamedTrainer):
    """:class:`Trainer` with :class:`~astarpo.llm.algorithms.grpo.RLOO`; ``args`` is a
    :class:`~astarpo.llm.algorithms.grpo.RLOOConfig`."""

    algorithm_name = "rloo"


class REBELTrainer(_NamedTrainer):
    """:class:`Trainer` with :class:`~astarpo.llm.algorithms.rebel.REBEL`; ``args`` is a
    :class:`~astarpo.llm.algorithms.rebel.REBELConfig`; ``ref_model`` is unused."""

    algorithm_name = "rebel"


class PPOTrainer(_NamedTrainer):
    """:class:`Trainer` with :class:`~astarpo.llm.algorithms.ppo.PPO`; ``args`` is a
    :class:`~astarpo.llm.algorithms.ppo.PPOConfig`. The critic is a trainable copy of
    ``ref_model`` (or of ``model`` when ``ref_model`` is ``None``) with a zero value head;
    pass ``algorithm=PPO(config, critic)`` to use another."""

    algorithm_name = "ppo"
