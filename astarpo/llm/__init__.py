"""LLM fine-tuning with A*-PO: data and rewards, rollouts, Stage 1 values, the algorithms and
their one trainer, parallelism, evaluation, the toy model and the benchmark.

Needs the ``llm`` extra (``pip install "astarpo[llm]"``). The subpackages, from the bottom up
(each imports only those before it): ``parallel``, ``data``, ``rollout``, ``stage1``,
``algorithms``, ``training``, then ``eval``, ``toy`` and ``bench``; see docs/architecture.md.

The user-facing trainers and configs (Stage 1's ``Stage1Config`` included) and the trainer
extensions (``ReferenceRefresh``, ``StreamedStage1`` and their configs) are importable from here
(``from astarpo.llm import AStarPOTrainer, AStarPOConfig``); they load on first use, so
``import astarpo.llm`` stays cheap.
"""

from typing import Any

_LAZY = {
    "AStarPOConfig": "astarpo.llm.algorithms.astarpo",
    "GRPOConfig": "astarpo.llm.algorithms.grpo",
    "RLOOConfig": "astarpo.llm.algorithms.grpo",
    "PPOConfig": "astarpo.llm.algorithms.ppo",
    "REBELConfig": "astarpo.llm.algorithms.rebel",
    "Stage1Config": "astarpo.llm.stage1.config",
    "Trainer": "astarpo.llm.training.trainer",
    "AStarPOTrainer": "astarpo.llm.training.trainers",
    "GRPOTrainer": "astarpo.llm.training.trainers",
    "RLOOTrainer": "astarpo.llm.training.trainers",
    "PPOTrainer": "astarpo.llm.training.trainers",
    "REBELTrainer": "astarpo.llm.training.trainers",
    "TrainerExtension": "astarpo.llm.training.extensions",
    "ReferenceRefresh": "astarpo.llm.training.refresh",
    "RefreshConfig": "astarpo.llm.training.refresh",
    "StreamedStage1": "astarpo.llm.training.stream",
    "StreamConfig": "astarpo.llm.training.stream",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    """Import a trainer or config class on first use (keeps ``import astarpo.llm`` light)."""
    if name in _LAZY:
        import importlib  # only on first use of a lazy name

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'astarpo.llm' has no attribute {name!r}")
