r"""The baselines as :class:`~astarpo.llm.algorithm.Algorithm` objects, and their trainers.

Every baseline runs in the same :class:`~astarpo.llm.trainer.Trainer` loop as A*-PO (same
generator, rewards, optimizer, logging and checkpoints); only the number of samples per prompt
and the loss differ. The math is in :mod:`astarpo.llm.losses`:

==========  ===================  =============================================================
algorithm   samples per prompt   loss
==========  ===================  =============================================================
GRPO        ``group_size`` (8)   clipped surrogate, :func:`~astarpo.llm.losses.group_advantages`
RLOO        ``group_size`` (8)   clipped surrogate, :func:`~astarpo.llm.losses.rloo_advantages`
PPO         1                    clipped surrogate on GAE advantages + clipped value loss
REBEL       2                    :func:`~astarpo.llm.losses.rebel_loss` on the pair
==========  ===================  =============================================================

With one optimizer step per rollout (``update_epochs * minibatches == 1``) the sampling policy
equals the current one, so the "old" log-probs are the detached current ones and the loop skips
their extra forward pass (as TRL's GRPO does).

This module gathers them under one name: the algorithms live in
:mod:`astarpo.llm.group_baselines` (GRPO, RLOO, REBEL) and :mod:`astarpo.llm.ppo` (PPO), the
trainers in :mod:`astarpo.llm.baseline_trainers`; every name is re-exported here.
"""

from __future__ import annotations

from astarpo.llm.baseline_trainers import GRPOTrainer, PPOTrainer, REBELTrainer, RLOOTrainer
from astarpo.llm.group_baselines import GRPO, REBEL, RLOO
from astarpo.llm.ppo import PPO

__all__ = [
    "GRPO",
    "PPO",
    "REBEL",
    "RLOO",
    "GRPOTrainer",
    "PPOTrainer",
    "REBELTrainer",
    "RLOOTrainer",
]
