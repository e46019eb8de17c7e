"""Configuration of Stage 2 training: the shared loop fields and the A*-PO fields.

:class:`TrainConfig` holds what every algorithm's loop needs (batch sizes, optimizer, sampling,
logging, checkpoints); :class:`AStarPOConfig` adds ``beta2``. Baselines subclass
:class:`TrainConfig` the same way (a frozen dataclass adding their own fields and checks).

Both are frozen and validated on construction; an invalid value raises ``ValueError`` saying
which field is wrong and what is allowed. :func:`config_fields` lists every field with its
default and help text (used by ``astarpo train`` to make one flag per field).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from astarpo.llm.generation import SamplingConfig

__all__ = ["AStarPOConfig", "TrainConfig", "config_fields"]


def _doc(default: Any, help_text: str) -> Any:
    return field(default=default, metadata={"help": help_text})


@dataclass(frozen=True)
class TrainConfig:
    """Fields shared by every Stage 2 algorithm (see each field's ``help`` metadata).

    One *step* is: draw ``batch_size`` prompts, sample ``samples_per_prompt`` responses each
    (set by the algorithm), score them, compute reference log-probs, then ``update_epochs``
    passes over the rollout batch in ``minibatches`` optimizer steps each.
    """

    output_dir: str = _doc(
        "runs/astarpo",
        "Directory of metrics.jsonl, TensorBoard logs, checkpoints and the final model.",
    )
    seed: int = _doc(0, "Seed of the data order, sampling and minibatch shuffling.")
    max_steps: int = _doc(100, "Number of rollout batches (steps) to train for.")
    batch_size: int = _doc(64, "Prompts per step (rollout rows = batch_size x samples per prompt).")
    minibatches: int = _doc(
        1,
        "Optimizer steps per rollout batch and epoch; the prompts of a "
        "step are split into this many equal minibatches (whole groups).",
    )
    update_epochs: int = _doc(1, "Passes over each rollout batch (A*-PO uses 1: on-policy).")
    micro_batch_size: int = _doc(
        0,
        "Rows per forward/backward (gradient accumulation inside "
        "a minibatch); 0 = the whole minibatch at once.",
    )
    learning_rate: float = _doc(1e-6, "AdamW learning rate (constant).")
    weight_decay: float = _doc(0.0, "AdamW weight decay.")
    max_grad_norm: float = _doc(1.0, "Gradient clipping by global L2 norm; 0 disables it.")
    entropy_coef: float = _doc(
        0.0,
        "Weight of the token-mean entropy bonus subtracted from the "
        "loss (the official A*-PO code uses 0.001).",
    )
    max_new_tokens: int = _doc(
        256,
        "Most generated tokens per response (EOS included); "
        "longer responses are truncated and flagged.",
    )
    temperature: float = _doc(1.0, "Sampling temperature of the rollouts (0 = greedy).")
    top_p: float = _doc(1.0, "Nucleus-sampling mass of the rollouts, in (0, 1].")
    generation_batch_size: int = _doc(64, "Rows per generate call of the HF generator.")
    save_steps: int = _doc(
        50, "Save a checkpoint every this many steps (and at the end); 0 saves only at the end."
    )
    device: str = _doc("auto", "'auto' (CUDA when available, else CPU), 'cpu', 'cuda' or 'cuda:N'.")
    mixed_precision: str = _doc(
        "auto",
        "'auto' (bf16 autocast on CUDA, none on CPU), 'bf16' "
        "or 'no'. Weights and optimizer state stay float32.",
    )
    tensorboard: bool = _doc(True, "Also write TensorBoard event files to output_dir/tb.")
    progress: bool = _doc(True, "Show a tqdm progress bar.")
    # Scaling up (docs/scaling.md): data parallelism, generation backend, LoRA.
    parallel: str = _doc(
        "ddp",
        "Under torchrun: 'ddp' (a full replica per rank, gradients all-reduced) or 'fsdp' "
        "(FSDP2 fully_shard: parameters, gradients and optimizer state sharded).",
    )
    seed_chunk_size: int = _doc(
        0,
        "Prompts per seeded generation chunk: 0 = one seed per step in one process and 1 "
        "under torchrun; runs with the same non-zero value sample the same responses whatever "
        "their world size.",
    )
    generation_backend: str = _doc(
        "auto",
        "Rollout generation: 'hf' (transformers), 'vllm', or 'auto' (vLLM when it is installed "
        "and a GPU is present, else hf).",
    )
    vllm_gpu_memory_utilization: float = _doc(
        0.3, "Share of GPU memory the colocated vLLM engine may take (weights + KV cache)."
    )
    lora_r: int = _doc(
        0,
        "LoRA rank; 0 = full fine-tuning. With LoRA the reference is the same model with its "
        "adapters disabled (no second copy of the weights).",
    )
    lora_alpha: int = _doc(32, "LoRA scaling numerator (update = lora_alpha / lora_r * B A).")

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
        for name in ("learning_rate", "weight_decay", "max_grad_norm", "entropy_coef"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}.")
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
        SamplingConfig(self.max_new_tokens, self.temperature, self.top_p)  # validates
        if self.parallel not in ("ddp", "fsdp"):
            raise ValueError(f"parallel must be 'ddp' or 'fsdp', got {self.parallel!r}.")
        if self.parallel == "fsdp" and self.lora_r:
            raise ValueError(
                "parallel='fsdp' with lora_r > 0 is not supported: use parallel='ddp' with LoRA "
                "(the frozen base is shared with the reference), or FSDP2 without LoRA."
            )
        if self.generation_backend not in ("auto", "hf", "vllm"):
            raise ValueError(
                "generation_backend must be 'auto', 'hf' or 'vllm', "
                f"got {self.generation_backend!r}."
            )
        if not 0 < self.vllm_gpu_memory_utilization <= 1:
            raise ValueError(
                "vllm_gpu_memory_utilization must be in (0, 1], got "
                f"{self.vllm_gpu_memory_utilization!r}."
            )

    @property
    def sampling(self) -> SamplingConfig:
        """The rollout :class:`~astarpo.llm.generation.SamplingConfig`."""
        return SamplingConfig(self.max_new_tokens, self.temperature, self.top_p)

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class AStarPOConfig(TrainConfig):
    """A*-PO Stage 2: :class:`TrainConfig` plus the regression strength ``beta2``.

    Example:
        >>> from astarpo.llm import AStarPOConfig
        >>> AStarPOConfig(batch_size=64, learning_rate=1e-4, beta2=1e-3).sampling.temperature
        1.0
    """

    beta2: float = _doc(
        1e-3, "KL strength of the Stage 2 regression (paper Eq. 4; the paper uses 1e-3)."
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (
            isinstance(self.beta2, (int, float)) and math.isfinite(self.beta2) and self.beta2 > 0
        ):
            raise ValueError(f"beta2 must be a finite number > 0, got {self.beta2!r}.")


def config_fields(cls: type) -> list[tuple[str, Any, str]]:
    """``(name, default, help)`` of every field of a config dataclass, in declaration order."""
    return [(f.name, f.default, f.metadata.get("help", "")) for f in dataclasses.fields(cls)]
