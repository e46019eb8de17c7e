"""LLM fine-tuning with A*-PO: data, rewards, generation, Stage 1 values, the trainer, evaluation.

Needs the ``llm`` extra (``pip install "astarpo[llm]"``). Submodules are imported on use.
"""

from typing import Any

__all__ = ["AStarPOConfig", "AStarPOTrainer"]

_LAZY = {
    "AStarPOConfig": "astarpo.llm.config",
    "AStarPOTrainer": "astarpo.llm.trainer",
}


def __getattr__(name: str) -> Any:
    """Import ``AStarPOTrainer`` and ``AStarPOConfig`` on first use (keeps imports light)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'astarpo.llm' has no attribute {name!r}")
