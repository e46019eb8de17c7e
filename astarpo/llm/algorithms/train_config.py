"""The loop fields every algorithm's config extends: :class:`TrainConfig`.

:class:`TrainConfig` holds what every algorithm's loop needs (batch sizes, optimizer, sampling,
logging, checkpoints). Each algorithm's config (``AStarPOConfig`` in
:mod:`astarpo.llm.algorithms.astarpo`, ``GRPOConfig`` in :mod:`astarpo.llm.algorithms.grpo`,
...) is a frozen dataclass subclassing it with its own fields and checks; it lives beside its
algorithm because the algorithm reads loop fields (``max_new_tokens``, ``update_epochs``) and so
must not import the trainer. The field helpers and checks are in
:mod:`astarpo.llm.algorithms.config`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from astarpo.config import doc_field
from astarpo.llm.algorithms.config import check_choice
from astarpo.llm.parallel.dist import DEFAULT_DIST_TIMEOUT
from astarpo.llm.rollout.base import SamplingConfig

__all__ = ["REPORTERS", "TrainConfig"]


REPORTERS = ("tensorboard", "trackio", "wandb")
"""The trackers ``report_to`` may name (besides ``"none"``)."""


@dataclass(frozen=True)
class TrainConfig:
    """Fields shared by every Stage 2 algorithm (see each field's ``help`` metadata).

    One *step* is: draw ``batch_size`` prompts, sample ``samples_per_prompt`` responses each
    (set by the algorithm), score them, compute reference log-probs, then ``update_epochs``
    passes over the rollout batch in ``minibatches`` optimizer steps each.
    """

    output_dir: str = doc_field(
        "runs/astarpo",
        "Directory of metrics.jsonl, TensorBoard logs, checkpoints and the final model.",
    )
    seed: int = doc_field(0, "Seed of the data order, sampling and minibatch shuffling.")
    max_steps: int = doc_field(100, "Number of rollout batches (steps) to train for.")
    batch_size: int = doc_field(
        64, "Prompts per step (rollout rows = batch_size x samples per prompt)."
    )
    minibatches: int = doc_field(
        1,
        "Optimizer steps per rollout batch and epoch; the prompts of a "
        "step are split into this many equal minibatches (whole groups).",
    )
    update_epochs: int = doc_field(1, "Passes over each rollout batch (A*-PO uses 1: on-policy).")
    micro_batch_size: int = doc_field(
        0,
        "Rows per forward/backward (gradient accumulation inside "
        "a minibatch); 0 = the whole minibatch at once.",
    )
    learning_rate: float = doc_field(1e-6, "AdamW learning rate (constant).")
    weight_decay: float = doc_field(0.0, "AdamW weight decay.")
    max_grad_norm: float = doc_field(1.0, "Gradient clipping by global L2 norm; 0 disables it.")
    entropy_coef: float = doc_field(
        0.0,
        "Weight of the token-mean entropy bonus subtracted from the "
        "loss (the official A*-PO code uses 0.001).",
    )
    max_new_tokens: int = doc_field(
        SamplingConfig.max_new_tokens,  # Stage1Config's default too: V* tables must match it
        "Most generated tokens per response (EOS included); "
        "longer responses are truncated and flagged.",
    )
    temperature: float = doc_field(1.0, "Sampling temperature of the rollouts (0 = greedy).")
    top_p: float = doc_field(1.0, "Nucleus-sampling mass of the rollouts, in (0, 1].")
    generation_batch_size: int = doc_field(64, "Rows per generate call of the HF generator.")
    max_train_seconds: float = doc_field(
        0.0,
        "Wall-clock budget of training in seconds (generation, rewards, reference log-probs and "
        "updates; evaluation and checkpoints excluded); 0 = no limit, stop at max_steps.",
    )
    eval_steps: int = doc_field(
        0, "Evaluate (the trainer's eval_fn) every this many steps; 0 = only before and after."
    )
    eval_every_seconds: float = doc_field(
        0.0, "Evaluate every this many seconds of training time; 0 = off."
    )
    save_steps: int = doc_field(
        50, "Save a checkpoint every this many steps (and at the end); 0 saves only at the end."
    )
    save_total_limit: int = doc_field(
        2,
        "Keep only the newest this many checkpoint-<step> directories (final/ is kept apart); "
        "0 keeps every checkpoint.",
    )
    overwrite_output_dir: bool = doc_field(
        False,
        "Start a new run in a non-empty output_dir, deleting the earlier run's checkpoints, "
        "metrics and final model (refused otherwise; resume=True continues it instead).",
    )
    reward_timeout: float = doc_field(
        600.0,
        "Deadline in seconds of one call of a custom reward function on a batch; a call past it "
        "stops the run with an error naming the function. 0 = no deadline. Built-in math_verify "
        "has its own per-item timeout in killable worker processes.",
    )
    dist_timeout: float = doc_field(
        DEFAULT_DIST_TIMEOUT,
        "Under torchrun: seconds one phase of a step (generation, rewards, reference log-probs, "
        "update, checkpoint) may run on one rank; a rank past it is stopped and named, which "
        "stops the job. Collectives time out after twice this. No effect in one process.",
    )
    device: str = doc_field(
        "auto", "'auto' (CUDA when available, else CPU), 'cpu', 'cuda' or 'cuda:N'."
    )
    mixed_precision: str = doc_field(
        "auto",
        "'auto' (bf16 autocast on CUDA, none on CPU), 'bf16' (on CPU too, opt-in: a gain only "
        "where matmuls dominate) or 'no'. Weights and optimizer state stay float32.",
    )
    report_to: str | Sequence[str] = doc_field(
        "tensorboard",
        "Trackers that receive every step record besides metrics.jsonl: 'tensorboard' "
        "(output_dir/tb), 'trackio', 'wandb', several (a list, or comma-separated) or 'none' "
        "(the one way to say no tracker: an empty value is an error). trackio and wandb need "
        "the extras of those names.",
    )
    progress: bool = doc_field(True, "Show a tqdm progress bar.")
    # Scaling up (docs/scaling.md): data parallelism, generation backend, LoRA.
    parallel: str = doc_field(
        "ddp",
        "Under torchrun: 'ddp' (a full replica per rank, gradients all-reduced) or 'fsdp' "
        "(FSDP2 fully_shard: parameters, gradients and optimizer state sharded).",
    )
    seed_chunk_size: int = doc_field(
        0,
        "Prompts per seeded generation chunk: 0 = one seed per step in one process and 1 "
        "under torchrun; runs with the same non-zero value sample the same responses whatever "
        "their world size.",
    )
    backend: str = doc_field(
        "auto",
        "Generation backend of the rollouts: 'hf' (transformers), 'vllm', or 'auto' (vLLM when "
        "it is installed and a GPU is present, else hf).",
    )
    gpu_memory_utilization: float = doc_field(
        0.3,
        "Share of GPU memory the colocated vLLM engine may take (weights + KV cache); vLLM's "
        "CPU build reads it as the share of CPU memory.",
    )
    lora_r: int = doc_field(
        0,
        "LoRA rank; 0 = full fine-tuning. With LoRA the reference is the same model with its "
        "adapters disabled (no second copy of the weights).",
    )
    lora_alpha: int = doc_field(32, "LoRA scaling numerator (update = lora_alpha / lora_r * B A).")

    def __post_init__(self) -> None:
        ints = {
            "max_steps": 1,
            "batch_size": 1,
            "minibatches": 1,
            "update_epochs": 1,
            "micro_batch_size": 0,
            "max_new_tokens": 1,
            "generation_batch_size": 1,
            "save_steps": 0,
            "save_total_limit": 0,
            "eval_steps": 0,
            "seed": 0,
            "seed_chunk_size": 0,
            "lora_r": 0,
            "lora_alpha": 1,
        }
        for name, low in ints.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {v!r}.")
        if self.batch_size % self.minibatches:
            raise ValueError(
                f"batch_size ({self.batch_size}) must be divisible by minibatches "
                f"({self.minibatches}); each minibatch holds whole prompts."
            )
        for name in (
            "learning_rate",
            "weight_decay",
            "max_grad_norm",
            "entropy_coef",
            "max_train_seconds",
            "eval_every_seconds",
            "reward_timeout",
            "dist_timeout",
        ):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}.")
        if self.dist_timeout == 0:
            raise ValueError("dist_timeout must be > 0 (seconds; default 900).")
        if self.learning_rate == 0:
            raise ValueError("learning_rate must be > 0.")
        if self.mixed_precision not in ("auto", "bf16", "no"):
            raise ValueError(
                f"mixed_precision must be 'auto', 'bf16' or 'no', got {self.mixed_precision!r}."
            )
        if not (self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:")):
            raise ValueError(
                f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {self.device!r}."
            )
        # Validated and built once: the trainer reads it every step (not a field: asdict, repr,
        # equality and replace() see only the three fields it is made of).
        object.__setattr__(
            self, "_sampling", SamplingConfig(self.max_new_tokens, self.temperature, self.top_p)
        )
        if self.parallel not in ("ddp", "fsdp"):
            raise ValueError(f"parallel must be 'ddp' or 'fsdp', got {self.parallel!r}.")
        if self.parallel == "fsdp" and self.lora_r:
            raise ValueError(
                "parallel='fsdp' with lora_r > 0 is not supported: use parallel='ddp' with LoRA "
                "(the frozen base is shared with the reference), or FSDP2 without LoRA."
            )
        check_choice(self, "backend", ("auto", "hf", "vllm"))
        _ = self.reporters  # validates report_to
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(
                f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization!r}."
            )

    @property
    def reporters(self) -> tuple[str, ...]:
        """``report_to`` as a tuple of tracker names, ``()`` for ``"none"``.

        Raises:
            ValueError: an unknown tracker, ``"none"`` together with a tracker, or no name at
                all (``""``, ``[]``: say ``"none"``).
        """
        items = [self.report_to] if isinstance(self.report_to, str) else list(self.report_to)
        names = [n.strip() for item in items for n in str(item).split(",") if n.strip()]
        if not names:
            raise ValueError(
                f"report_to is empty ({self.report_to!r}); give 'none' for no tracker, or any "
                f"of {', '.join(REPORTERS)} (a list or comma-separated)."
            )
        bad = [n for n in names if n not in (*REPORTERS, "none")]
        if bad or ("none" in names and len(names) > 1):
            raise ValueError(
                f"report_to must be 'none' or any of {', '.join(REPORTERS)} (a list or "
                f"comma-separated), got {self.report_to!r}."
            )
        return tuple(dict.fromkeys(n for n in names if n != "none"))

    @property
    def sampling(self) -> SamplingConfig:
        """The rollout :class:`~astarpo.llm.rollout.base.SamplingConfig` of ``max_new_tokens``,
        ``temperature`` and ``top_p``, built (and validated) once, at construction."""
        sampling: SamplingConfig = self.__dict__["_sampling"]
        return sampling

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)
