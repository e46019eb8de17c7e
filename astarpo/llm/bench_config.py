"""Configuration of the efficiency benchmark (:func:`~astarpo.llm.bench.run_bench`).

:class:`BenchConfig` holds the settings shared by every algorithm; ``_algorithm_config`` turns
it into the training config of one algorithm (same budget, learning rate and seed for all).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ALGORITHMS", "BenchConfig"]

#: The algorithms the benchmark knows, in table order.
ALGORITHMS: tuple[str, ...] = ("astarpo", "grpo", "rloo", "ppo", "rebel")


@dataclass(frozen=True)
class BenchConfig:
    """Settings of :func:`~astarpo.llm.bench.run_bench` (shared by every algorithm unless the
    name says otherwise).

    Args:
        out_dir: Output directory (reference, values, runs, bench.json/md/png).
        algos: Algorithms to compare; must include ``"astarpo"`` (the ratio baseline).
        seeds: Number of seeds (0 .. seeds-1) per algorithm. Default 2.
        steps: Training steps per run. Default 20.
        batch_size: Prompts per step (prompt budget = steps * batch_size). Default 32.
        eval_every: Steps between held-out evaluations. Default 2.
        eval_size: Held-out prompts, disjoint from training. Default 300.
        learning_rate: AdamW learning rate of every algorithm. Default 3e-4.
        max_new_tokens: Token budget per response. Default 5 (as in the demo).
        n_samples: Stage 1 reference samples per prompt (N). Default 8.
        beta1: Stage 1 KL strength. Default 0.5.
        beta2: A*-PO regression strength. Default 1e-3 (as in the paper).
        group_size: GRPO/RLOO samples per prompt (G). Default 8.
        eta: REBEL's step size (1/eta is comparable to beta2). Default 1e3.
        target_accuracy: Held-out accuracy whose first crossing is timed; 0 (default) picks
            ``ref + 0.8 * (min_algo mean final - ref)``, reachable by every algorithm that
            improves on the reference.
        sft_steps: SFT steps of the reference; 0 (default) = 500.
        model_overrides: ``Qwen2Config`` fields for a larger model (empty: the toy default).
        device: ``"cpu"``, ``"cuda"`` or ``"auto"``. Default ``"cpu"``.
        mixed_precision: ``"auto"`` (bf16 autocast on CUDA), ``"bf16"`` or ``"no"``.
        threads: Torch CPU threads per run. Default 1 (steadier timings on a shared machine).
        generation_batch_size: Rows per ``generate`` call. Default 256.
        cache_dir: SFT cache directory (None: ``$ASTARPO_CACHE`` or ``~/.cache/astarpo``).
    """

    out_dir: str = "runs/bench"
    algos: tuple[str, ...] = ALGORITHMS
    seeds: int = 2
    steps: int = 20
    batch_size: int = 32
    eval_every: int = 2
    eval_size: int = 300
    learning_rate: float = 3e-4
    max_new_tokens: int = 5
    n_samples: int = 8
    beta1: float = 0.5
    beta2: float = 1e-3
    group_size: int = 8
    eta: float = 1e3
    target_accuracy: float = 0.0
    sft_steps: int = 0
    model_overrides: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    mixed_precision: str = "auto"
    threads: int = 1
    generation_batch_size: int = 256
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        unknown = [a for a in self.algos if a not in ALGORITHMS]
        if unknown or "astarpo" not in self.algos:
            raise ValueError(
                f"algos must be drawn from {ALGORITHMS} and include 'astarpo' (the baseline of "
                f"the ratios); got {self.algos}."
            )
        if self.sft_steps < 0:
            raise ValueError(f"sft_steps must be >= 0 (0 = default), got {self.sft_steps}.")
        for name in (
            "seeds",
            "steps",
            "batch_size",
            "eval_every",
            "eval_size",
            "max_new_tokens",
            "n_samples",
            "threads",
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}.")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2, got {self.group_size}.")
        if not 0.0 <= self.target_accuracy <= 1.0:
            raise ValueError(
                f"target_accuracy must be in [0, 1] (0 = automatic), got {self.target_accuracy}."
            )


def _algorithm_config(name: str, cfg: BenchConfig, seed: int, out: Path) -> Any:
    from astarpo.llm.baseline_config import GRPOConfig, PPOConfig, REBELConfig, RLOOConfig
    from astarpo.llm.config import AStarPOConfig

    common: dict[str, Any] = dict(
        output_dir=str(out),
        seed=seed,
        max_steps=cfg.steps,
        batch_size=cfg.batch_size,
        learning_rate=cfg.learning_rate,
        max_new_tokens=cfg.max_new_tokens,
        save_steps=0,
        device=cfg.device,
        mixed_precision=cfg.mixed_precision,
        tensorboard=False,
        progress=False,
        generation_batch_size=cfg.generation_batch_size,
    )
    if name == "astarpo":
        return AStarPOConfig(beta2=cfg.beta2, **common)
    if name == "grpo":
        return GRPOConfig(group_size=cfg.group_size, **common)
    if name == "rloo":
        return RLOOConfig(group_size=cfg.group_size, **common)
    if name == "ppo":
        return PPOConfig(**common)
    if name == "rebel":
        return REBELConfig(eta=cfg.eta, **common)
    raise ValueError(f"unknown algorithm {name!r}; expected one of {ALGORITHMS}.")
