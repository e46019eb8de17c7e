r"""The config of A*-PO on TRL's ``GRPOTrainer``: :class:`AStarPOGRPOConfig`, and the TRL pin.

:class:`AStarPOGRPOConfig` is TRL 1.16's ``GRPOConfig`` with one generation per prompt,
``beta2``, the paper's all-wrong filter and the V* table check. Every ``GRPOConfig`` field
that still means something is kept as TRL documents it: vLLM (``use_vllm``, ``vllm_mode``
``"server"`` or ``"colocate"``), gradient accumulation, ``steps_per_generation``,
``mask_truncated_completions``, ``report_to``, logging, checkpointing, the accelerate /
DeepSpeed / FSDP setup. The fields of GRPO's clipped surrogate, which A*-PO's regression does
not use, are refused when set (:data:`GRPO_ONLY`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from trl import GRPOConfig

from astarpo.objective import check_beta

__all__ = ["GRPO_ONLY", "SUPPORTED_TRL", "AStarPOGRPOConfig", "check_trl_version"]

SUPPORTED_TRL = "1.16"
"""The TRL minor version whose private ``GRPOTrainer`` methods
(``_generate_and_score_completions``, ``_calculate_rewards``, ``_compute_loss``) are overridden."""

GRPO_ONLY = (
    "loss_type",
    "epsilon",
    "epsilon_high",
    "delta",
    "importance_sampling_level",
    "scale_rewards",
    "multi_objective_aggregation",
    "top_entropy_quantile",
    "entropy_coef",
    "use_adaptive_entropy",
    "off_policy_mask_threshold",
    "use_bias_correction_kl",
    "sapo_temperature_neg",
    "sapo_temperature_pos",
    "vespo_k_pos",
    "vespo_lambda_pos",
    "vespo_k_neg",
    "vespo_lambda_neg",
    "sync_ref_model",
)
"""``GRPOConfig`` fields A*-PO's loss does not read: a value other than TRL's default is refused
(``sync_ref_model`` would move the reference away from the one V* was estimated under)."""


def check_trl_version(version: str | None = None) -> str:
    """Refuse a TRL other than :data:`SUPPORTED_TRL` (``1.16.x``).

    Args:
        version: The version to check (default: the installed ``trl.__version__``).

    Returns:
        The version.

    Raises:
        ImportError: another version, naming the supported one and how to install it.
    """
    if version is None:
        import trl

        version = str(trl.__version__)
    parts = version.split(".")
    if ".".join(parts[:2]) != SUPPORTED_TRL:
        raise ImportError(
            f"astarpo.integrations.trl overrides private methods of TRL {SUPPORTED_TRL}'s "
            "GRPOTrainer (_generate_and_score_completions, _calculate_rewards, _compute_loss), "
            f"which other versions change; found trl {version}. Install the supported one: "
            f"pip install 'trl=={SUPPORTED_TRL}.*' (the version tested is in "
            "requirements/trl.lock)."
        )
    return version


class _OneGeneration(int):
    """The number 1 while ``GRPOConfig.__post_init__`` runs (see :class:`AStarPOGRPOConfig`)."""

    def __lt__(self, other: object) -> bool:
        return False if other == 2 else int(self) < other  # type: ignore[operator]


@dataclass
class AStarPOGRPOConfig(GRPOConfig):
    r"""TRL 1.16's ``GRPOConfig`` for A*-PO's Stage 2 (:class:`~astarpo.integrations.trl.
    AStarPOGRPOTrainer`).

    One generation per prompt: ``num_generations`` is 1 and must stay 1.
    ``GRPOConfig.__post_init__`` refuses ``num_generations < 2`` (GRPO's group baseline needs two
    samples; A*-PO's baseline is V*). So that its other checks and derived sizes
    (``generation_batch_size``, ``steps_per_generation``, the vLLM settings) still run, it is
    called with ``num_generations`` set to an ``int`` equal to 1 that compares as not below 2;
    every use of it there (``%``, ``//``) sees 1, and a plain ``1`` is put back when it returns.

    ``beta`` (TRL's KL coefficient) is set to ``beta2``: TRL then computes the reference
    log-probs (with ``peft_config``: the model with its adapters disabled), which A*-PO's loss
    needs; TRL's KL term itself is not used.

    Attributes:
        beta2: KL strength of the Stage 2 regression (paper Eq. 4; the paper uses 1e-3).
        filter_all_wrong: Drop the prompts whose Stage 1 samples all failed (pass rate 0), the
            paper's filter; needs a ``ValueTable`` or a ``pass_rate`` column.
        allow_v_star_mismatch: Train with a V* table made with another reference model,
            rewards, sampling settings or answers (refused by default).
    """

    num_generations: int | None = field(
        default=1,
        metadata={"help": "Generations per prompt: A*-PO samples one (must be 1)."},
    )
    beta: float | None = field(
        default=None,
        metadata={"help": "Set to beta2 (give beta2 instead; another value is refused)."},
    )
    vllm_importance_sampling_correction: bool = field(
        default=False,
        metadata={
            "help": "Must stay False: A*-PO's least-squares regression takes no importance "
            "weights (GRPO's default is True)."
        },
    )
    beta2: float = field(
        default=1e-3,
        metadata={"help": "KL strength of the Stage 2 regression (paper Eq. 4; the paper: 1e-3)."},
    )
    filter_all_wrong: bool = field(
        default=False,
        metadata={
            "help": "Drop prompts whose Stage 1 samples all failed (pass rate 0), the paper's "
            "filter; needs a ValueTable or a pass_rate column."
        },
    )
    allow_v_star_mismatch: bool = field(
        default=False,
        metadata={
            "help": "Train with a V* table whose provenance (reference model, reward functions, "
            "sampling settings, answers) differs from this run's; refused by default."
        },
    )

    def __post_init__(self) -> None:
        check_trl_version()
        check_beta(self.beta2, "beta2")
        if self.num_generations != 1:
            raise ValueError(
                f"num_generations must be 1 (A*-PO samples one response per prompt; its "
                f"baseline is V*), got {self.num_generations!r}."
            )
        if self.beta is not None and self.beta != self.beta2:
            raise ValueError(
                f"beta ({self.beta!r}) is set from beta2 ({self.beta2!r}); give beta2 only."
            )
        if self.vllm_importance_sampling_correction:
            raise ValueError(
                "vllm_importance_sampling_correction must be False: A*-PO's regression takes no "
                "importance weights."
            )
        if self.temperature != 1.0:
            raise ValueError(
                f"temperature must be 1.0, got {self.temperature!r}: TRL scores log-probs at the "
                "sampling temperature (logits / temperature), and A*-PO regresses the policy's "
                "own log-probs, which they equal only at 1.0."
            )
        defaults = {f.name: f.default for f in fields(GRPOConfig)}
        changed = [
            f"{k}={getattr(self, k)!r}" for k in GRPO_ONLY if getattr(self, k) != defaults[k]
        ]
        if changed:
            raise ValueError(
                f"{', '.join(changed)}: GRPO-only settings that A*-PO's loss does not read; leave "
                "them at TRL's defaults."
            )
        self.beta = float(self.beta2)
        self.num_generations = _OneGeneration(1)
        try:
            super().__post_init__()
        finally:
            self.num_generations = 1
