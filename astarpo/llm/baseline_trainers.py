r"""Trainers of the baselines: the shared :class:`~astarpo.llm.trainer.Trainer` with a baseline.

:class:`GRPOTrainer`, :class:`RLOOTrainer`, :class:`REBELTrainer` and :class:`PPOTrainer` run
the same loop as A*-PO (same generator, rewards, optimizer, logging and checkpoints) with the
algorithms of :mod:`astarpo.llm.group_baselines` and :mod:`astarpo.llm.ppo`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from astarpo.llm.baseline_config import GRPOConfig, PPOConfig, REBELConfig, RLOOConfig
from astarpo.llm.config import TrainConfig
from astarpo.llm.critic import ValueModel
from astarpo.llm.generation import Generator
from astarpo.llm.group_baselines import GRPO, REBEL, RLOO
from astarpo.llm.ppo import PPO
from astarpo.llm.trainer import EvalFn, Trainer

__all__ = ["GRPOTrainer", "PPOTrainer", "REBELTrainer", "RLOOTrainer"]


def _checked(args: Any, config_type: type[TrainConfig]) -> Any:
    if args is None:
        return config_type()
    if not isinstance(args, config_type):
        raise TypeError(f"args must be a {config_type.__name__}, got {type(args).__name__}.")
    return args


class _GroupBaselineTrainer(Trainer):
    """The shared constructor of the group-sampling baselines' trainers.

    Subclasses name their config type and algorithm; everything else is the shared loop.

    Args:
        model: The policy, trained in place.
        ref_model: The frozen reference; may be ``None`` when the algorithm does not use it.
        reward_funcs: Reward functions (TRL's signature).
        args: The subclass's config (its defaults when ``None``).
        train_dataset: Rows with a ``prompt`` key (other keys go to the rewards).
        tokenizer: The policy's tokenizer.
        generator: Optional generator (default: Hugging Face ``generate``).
        eval_fn: Optional evaluation, see :class:`~astarpo.llm.trainer.Trainer`.
        eval_steps: Steps between evaluations.
    """

    config_type: type[TrainConfig]
    algorithm_type: Callable[[Any], Any]

    def __init__(
        self,
        model: Any,
        ref_model: Any,
        reward_funcs: Sequence[Callable[..., Any]],
        args: TrainConfig | None = None,
        train_dataset: Sequence[Mapping[str, Any]] = (),
        tokenizer: Any = None,
        generator: Generator | None = None,
        eval_fn: EvalFn | None = None,
        eval_steps: int = 0,
    ) -> None:
        cfg = _checked(args, self.config_type)
        super().__init__(
            model,
            ref_model,
            reward_funcs,
            self.algorithm_type(cfg),
            cfg,
            train_dataset,
            None,
            tokenizer,
            generator,
            eval_fn,
            eval_steps,
        )


class GRPOTrainer(_GroupBaselineTrainer):
    """The shared loop with :class:`~astarpo.llm.group_baselines.GRPO` (or Dr.GRPO).

    Takes the arguments of :class:`_GroupBaselineTrainer` with ``args`` a
    :class:`~astarpo.llm.baseline_config.GRPOConfig`; ``ref_model`` may be ``None`` when
    ``kl_coef == 0``.

    Example:
        >>> trainer = GRPOTrainer(model, None, [exact_match_reward],  # doctest: +SKIP
        ...     args=GRPOConfig(group_size=8), train_dataset=rows, tokenizer=tokenizer)
        >>> trainer.train()  # doctest: +SKIP
    """

    config_type = GRPOConfig
    algorithm_type = GRPO


class RLOOTrainer(_GroupBaselineTrainer):
    """The shared loop with :class:`~astarpo.llm.group_baselines.RLOO`.

    Takes the arguments of :class:`_GroupBaselineTrainer` with ``args`` a
    :class:`~astarpo.llm.baseline_config.RLOOConfig`.
    """

    config_type = RLOOConfig
    algorithm_type = RLOO


class REBELTrainer(_GroupBaselineTrainer):
    """The shared loop with :class:`~astarpo.llm.group_baselines.REBEL`.

    Takes the arguments of :class:`_GroupBaselineTrainer` with ``args`` a
    :class:`~astarpo.llm.baseline_config.REBELConfig`; ``ref_model`` is unused (may be ``None``).
    """

    config_type = REBELConfig
    algorithm_type = REBEL


class PPOTrainer(Trainer):
    """The :class:`~astarpo.llm.trainer.Trainer` with :class:`~astarpo.llm.ppo.PPO`.

    Args:
        model: The policy, trained in place.
        ref_model: The frozen reference (the critic's initialization); may be ``None`` when
            ``kl_coef == 0`` (the critic then copies ``model``).
        reward_funcs: Reward functions (TRL's signature).
        args: A :class:`~astarpo.llm.baseline_config.PPOConfig`.
        train_dataset: Rows with a ``prompt`` key (other keys go to the rewards).
        tokenizer: The policy's tokenizer.
        generator: Optional generator (default: Hugging Face ``generate``).
        eval_fn: Optional evaluation, see :class:`~astarpo.llm.trainer.Trainer`.
        eval_steps: Steps between evaluations.
        critic: The value model; default ``ValueModel.from_causal_lm(ref_model or model)`` (a
            trainable copy of the reference's transformer with a zero-initialized value head).
    """

    def __init__(
        self,
        model: Any,
        ref_model: Any,
        reward_funcs: Sequence[Callable[..., Any]],
        args: PPOConfig | None = None,
        train_dataset: Sequence[Mapping[str, Any]] = (),
        tokenizer: Any = None,
        generator: Generator | None = None,
        eval_fn: EvalFn | None = None,
        eval_steps: int = 0,
        critic: torch.nn.Module | None = None,
    ) -> None:
        cfg = _checked(args, PPOConfig)
        if critic is None:
            critic = ValueModel.from_causal_lm(ref_model if ref_model is not None else model)
        super().__init__(
            model,
            ref_model,
            reward_funcs,
            PPO(cfg, critic),
            cfg,
            train_dataset,
            None,
            tokenizer,
            generator,
            eval_fn,
            eval_steps,
        )
