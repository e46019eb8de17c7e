"""Configuration of the efficiency benchmark (:func:`~astarpo.llm.bench.run.run_bench`).

:class:`BenchConfig` holds the settings shared by every algorithm; :func:`algorithm_config`
turns it into the registry config of one algorithm (same budget, learning rate and seed for all).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from astarpo.llm.algorithms.config import TrainConfig
from astarpo.llm.algorithms.registry import ALGORITHMS

__all__ = ["BenchConfig", "algorithm_config"]


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
        backend: Generation backend of every run (``"hf"`` by default, so that the runs compare
            the algorithms and not the backends; ``"vllm"`` or ``"auto"`` on request).
        generation_batch_size: Rows per ``generate`` call. Default 256.
        cache_dir: SFT cache directory (None: ``$ASTARPO_CACHE`` or ``~/.cache/astarpo``).
    """

    out_dir: str = "runs/bench"
    algos: tuple[str, ...] = tuple(ALGORITHMS)
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
    backend: str = "hf"
    generation_batch_size: int = 256
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        unknown = [a for a in self.algos if a not in ALGORITHMS]
        if unknown or "astarpo" not in self.algos:
            raise ValueError(
                f"algos must be drawn from {tuple(ALGORITHMS)} and include 'astarpo' (the "
                f"baseline of the ratios); got {self.algos}."
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


def algorithm_config(name: str, cfg: BenchConfig, seed: int, out: Path) -> TrainConfig:
    """The registry config of algorithm ``name`` for one run of the benchmark.

    Every algorithm gets the same loop fields (budget, learning rate, seed, sampling); the
    algorithm-specific settings of :class:`BenchConfig` (``beta2``, ``group_size``, ``eta``) go
    to the algorithms whose config has that field.

    Raises:
        ValueError: ``name`` is not in the registry.
    """
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; expected one of {', '.join(ALGORITHMS)}.")
    config_type = ALGORITHMS[name].config
    values: dict[str, Any] = dict(
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
        backend=cfg.backend,
        eval_steps=cfg.eval_every,
    )
    own = {f.name for f in fields(config_type)}
    for extra in ("beta2", "group_size", "eta"):
        if extra in own:
            values[extra] = getattr(cfg, extra)
    return config_type(**values)
