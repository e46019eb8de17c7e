"""A*-PO on TRL 1.16's ``GRPOTrainer``: :class:`AStarPOGRPOTrainer` and its config.

One generation per prompt, ``beta2``, V* from a table (checked against the run) or a dataset
column, the paper's filter optional; generation with ``transformers`` or vLLM (``use_vllm``,
``vllm_mode="server"`` or ``"colocate"``), PEFT (``peft_config``: the reference is the model
with its adapters disabled), accelerate / DeepSpeed, gradient accumulation, ``report_to``,
``mask_truncated_completions``, checkpoints: TRL's. Importing this package imports TRL; a TRL
other than 1.16 is refused when a config or trainer is built (its private methods are
overridden). The script is in ``docs/at_scale.md``.
"""

from astarpo.integrations.trl.config import (
    GRPO_ONLY,
    SUPPORTED_TRL,
    AStarPOGRPOConfig,
    check_trl_version,
)
from astarpo.integrations.trl.data import V_STAR, table_prompt, with_v_star
from astarpo.integrations.trl.trainer import AStarPOGRPOTrainer

__all__ = [
    "GRPO_ONLY",
    "SUPPORTED_TRL",
    "V_STAR",
    "AStarPOGRPOConfig",
    "AStarPOGRPOTrainer",
    "check_trl_version",
    "table_prompt",
    "with_v_star",
]
