"""The training protocol a study's runs share: :class:`RunOptions` (how they start) and
:class:`Protocol` (what every run trains under), fields declared with :func:`option` (default,
help, constraint: checked on construction); from a protocol, :func:`splits` (the task's fixed
rows), :func:`make_reference` (the weak SFT reference) and :func:`algorithm_config` (a run's).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from astarpo.llm.algorithms.config import check_choice
from astarpo.llm.algorithms.registry import ALGORITHMS
from astarpo.llm.algorithms.train_config import TrainConfig
from astarpo.llm.models.toy import make_char_tokenizer, make_toy_model
from astarpo.llm.parallel.dist import resolve_device
from astarpo.llm.stage1.config import Stage1Config
from astarpo.llm.toy.sft import SFTConfig, cached_sft
from astarpo.llm.toy.tasks import TASKS, get_task

__all__ = [
    "DROP_ARM",
    "STAGE1_ARMS",
    "Protocol",
    "RunOptions",
    "algorithm_config",
    "arm_algorithm",
    "check_backend",
    "make_reference",
    "option",
    "splits",
]

#: The A*-PO run that trains only on the prompts its Stage 1 solved at least once.
DROP_ARM = "astarpo_drop"
#: A*-PO runs whose Stage 1 spends its samples otherwise than the protocol's fixed
#: ``n_samples`` per prompt: name -> (``allocation``, mean samples per prompt as a fraction of
#: ``n_samples``). The adaptive runs take a pilot of half their mean and at most
#: ``4 n_samples`` samples of one prompt (:meth:`Protocol.stage1_config`).
STAGE1_ARMS: dict[str, tuple[str, float]] = {
    "astarpo_adaptive": ("adaptive", 1.0),
    "astarpo_adaptive_half": ("adaptive", 0.5),
    "astarpo_half": ("fixed", 0.5),
}

#: The task's problems, drawn once: the first ``HELD`` are the held-out region (held-out rows
#: first, validation rows from ``VAL_START``, whose first ``CHECK`` are also the reference's
#: stopping check), the next ``SFT`` the SFT data, whose first ``pool_size`` rows are the
#: training pool. Pinned so that a result stays reproducible.
REF_SEED, HELD, SFT, VAL_START, CHECK = 0, 1000, 8000, 500, 200
SFT_BATCH = 64


def option(
    default: Any, help: str, low: int | None = None, positive: bool = False, choices: Any = None
) -> Any:
    """A config field: ``default``, its ``help``, and its constraint: an integer >= ``low``, a
    finite number > 0 (``positive``), or one of ``choices``."""
    meta = {"help": help, "low": low, "positive": positive or None, "choices": choices}
    meta = {k: v for k, v in meta.items() if v is not None}
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class RunOptions:
    """How the runs of a study are started (the fields every study config has)."""

    threads: int = option(1, "Torch CPU threads per run (1: steadier timings when shared).", 1)
    rerun_slow: bool = option(
        False, "Run again, once, a run whose CPU/wall time is below 0.9 (its core was shared)."
    )

    def __post_init__(self) -> None:
        """Raise ``ValueError`` naming the first field that breaks its :func:`option` constraint."""
        for f in dataclasses.fields(self):
            v, low = getattr(self, f.name), f.metadata.get("low")
            if low is not None and (isinstance(v, bool) or not isinstance(v, int) or v < low):
                raise ValueError(f"{f.name} must be an integer >= {low}, got {v!r}.")
            number = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            if f.metadata.get("positive") and not (number and v > 0):
                raise ValueError(f"{f.name} must be a finite number > 0, got {v!r}.")
            if "choices" in f.metadata:
                check_choice(self, f.name, tuple(f.metadata["choices"]))


@dataclass(frozen=True)
class Protocol(RunOptions):
    """The protocol every run of a study trains under (see each field's ``help``)."""

    task: str = option(
        "addition",
        "The task: addition (answers of 3 digits and EOS: 4 tokens), scratchpad (worked "
        "solutions of 70 tokens with EOS) or scratchpad2 (2-digit operands: 38 tokens).",
        choices=tuple(TASKS),
    )
    batch_size: int = option(32, "Prompts per step.", 1)
    pool_size: int = option(1000, "Training prompts: the pool every run draws from.", 1)
    eval_size: int = option(500, "Held-out prompts (the curves and the hard subset).", 1)
    val_size: int = option(200, "Validation prompts of a sweep (disjoint from both).", 1)
    max_new_tokens: int = option(5, "Token budget per response (EOS included).", 1)
    eval_every_seconds: float = option(
        5.0, "Held-out evaluation every this many s of training time (not counted).", None, True
    )
    n_samples: int = option(8, "Stage 1 reference samples per prompt (N; the paper: 8).", 1)
    beta1: float = option(0.5, "Stage 1 KL strength (the paper: 0.5).", positive=True)
    beta2: float = option(1e-3, "A*-PO regression strength (the paper: 1e-3).", positive=True)
    group_size: int = option(8, "GRPO/RLOO samples per prompt (G).", 2)
    eta: float = option(1e3, "REBEL's step size.", positive=True)
    sft_steps: int = option(2000, "Most SFT steps of the (weak) reference.", 1)
    reference_target: float = option(
        0.35,
        "SFT stops once the reference's expected accuracy on 200 validation problems "
        "(checked every 5 steps) reaches this, in (0, 1): a weak reference.",
    )
    sft_lr: float = option(2e-3, "SFT learning rate.", positive=True)
    model_overrides: dict[str, Any] = dataclasses.field(
        default_factory=dict, metadata={"help": "Qwen2Config fields over the task's model (JSON)."}
    )
    device: str = option("cpu", "Device of every run: cpu, cuda or auto.")
    mixed_precision: str = option("auto", "Mixed precision of every run: auto, bf16 or no.")
    backend: str = option(
        "hf",
        "Generation backend of every run and Stage 1 (evaluation: HF; vllm: the vllm extra).",
        choices=("hf", "vllm"),
    )
    micro_batch_size: int = option(
        0, "Sequences per forward/backward pass (0: the whole minibatch; > 0: matched memory).", 0
    )
    generation_batch_size: int = option(256, "Rows per generate call of every run.", 1)
    reward_timeout: float = option(600.0, "Deadline in s of a reward call (0: none).")
    cache_dir: str | None = option(None, "SFT cache (default $ASTARPO_CACHE or ~/.cache/astarpo).")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.reference_target < 1:
            raise ValueError(f"reference_target must be in (0, 1), got {self.reference_target}.")
        if not isinstance(self.model_overrides, dict):
            raise ValueError(f"model_overrides must be a dict, got {self.model_overrides!r}.")
        need = TASKS[self.task].response_tokens
        if need is not None and self.max_new_tokens < need:
            raise ValueError(
                f"max_new_tokens={self.max_new_tokens} cannot hold the {self.task} task's gold "
                f"responses ({need} tokens with EOS); raise it to at least {need}."
            )

    def stage1_config(self, seed: int, arm: str = "astarpo") -> Stage1Config:
        """Stage 1 of run ``arm`` under this protocol (about ``generation_batch_size``
        sequences per call): ``n_samples`` per prompt, or the rule of ``arm`` in
        :data:`STAGE1_ARMS` (mean ``n = max(1, round(fraction * n_samples))``; adaptive: a
        pilot of ``max(1, n // 2)``, at most ``4 n_samples`` per prompt)."""
        allocation, fraction = STAGE1_ARMS.get(arm, ("fixed", 1.0))
        n = max(1, round(fraction * self.n_samples))
        return Stage1Config(
            n_samples=n,
            beta1=self.beta1,
            max_new_tokens=self.max_new_tokens,
            seed=seed,
            prompts_per_call=max(1, self.generation_batch_size // n),
            allocation=allocation,
            pilot_samples=max(1, n // 2),
            max_samples=max(n, 4 * self.n_samples),
            reward_timeout=self.reward_timeout,
            progress=False,
        )

    def resolved(self) -> Any:
        """This config with ``cache_dir`` absolute (a run's worker starts in another folder)."""
        return replace(self, cache_dir=self.cache_dir and str(Path(self.cache_dir).resolve()))


def splits(cfg: Protocol) -> dict[str, list[dict[str, str]]]:
    """``{"sft", "pool", "held_out", "val", "check"}`` rows of ``cfg.task``: disjoint but for
    the pool (the first ``pool_size`` SFT rows) and the check rows (the first validation ones);
    ``ValueError`` when ``pool_size``, ``eval_size`` or ``val_size`` exceeds its region."""
    if cfg.pool_size > SFT or cfg.eval_size > VAL_START or cfg.val_size > HELD - VAL_START:
        raise ValueError(
            f"pool_size <= {SFT}, eval_size <= {VAL_START} and val_size <= {HELD - VAL_START} "
            "are required."
        )
    problems = get_task(cfg.task).rows(HELD + SFT, REF_SEED)
    return {
        "sft": problems[HELD:],
        "pool": problems[HELD : HELD + cfg.pool_size],
        "held_out": problems[: cfg.eval_size],
        "val": problems[VAL_START : VAL_START + cfg.val_size],
        "check": problems[VAL_START : VAL_START + CHECK],
    }


def make_reference(cfg: Protocol, out: Path) -> tuple[Any, dict[str, Any]]:
    """The task's toy model fine-tuned (or read from the SFT cache) on ``cfg.device`` until its
    expected accuracy on the check rows reaches ``reference_target``, saved with its tokenizer
    to ``out/reference`` and named by its absolute path (``config._name_or_path``: the
    name a Stage 1 table made with it records, which the runs that load that folder check).
    Returns ``(model in eval mode, SFT info)``."""
    tokenizer = make_char_tokenizer()
    rows = splits(cfg)
    shape = {**get_task(cfg.task).model, **cfg.model_overrides}
    model = make_toy_model(tokenizer, seed=REF_SEED, **shape).to(resolve_device(cfg.device))
    sft_cfg = SFTConfig(cfg.sft_steps, SFT_BATCH, cfg.sft_lr, target_accuracy=cfg.reference_target)
    model, info = cached_sft(
        model, tokenizer, rows["sft"], sft_cfg, cfg.cache_dir, False, check_rows=rows["check"]
    )
    model.save_pretrained(out / "reference")
    tokenizer.save_pretrained(out / "reference")
    model.config._name_or_path = str((out / "reference").resolve())
    return model.eval(), info


def check_backend(backend: str) -> None:
    """Refuse ``backend="vllm"`` without vLLM before any work (``RuntimeError``: how to install)."""
    if backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise RuntimeError(
            "--backend vllm needs vLLM, which is not installed in this environment; install "
            "the vllm extra (`make vllm-install` builds .venv-vllm) or use --backend hf."
        )


def arm_algorithm(arm: str) -> str:
    """The registry algorithm of a run name (:data:`DROP_ARM` and :data:`STAGE1_ARMS` are
    A*-PO; others are themselves)."""
    return "astarpo" if arm == DROP_ARM or arm in STAGE1_ARMS else arm


def algorithm_config(
    arm: str, cfg: Protocol, seed: int, out: Path, learning_rate: float, seconds: float
) -> TrainConfig:
    """The registry config of run ``arm`` (an algorithm, ``ValueError`` for another name, or
    :data:`DROP_ARM`: ``allow_v_star_mismatch``, a subset of its Stage 1 table): every field it
    shares with :class:`Protocol`, a budget of ``seconds`` (``max_steps`` unbounded)."""
    name = arm_algorithm(arm)
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; expected one of {', '.join(ALGORITHMS)}.")
    config_type = ALGORITHMS[name].config
    own = {f.name for f in dataclasses.fields(config_type)}
    values = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(Protocol) if f.name in own}
    values.update(output_dir=str(out), seed=seed, max_steps=10**9, max_train_seconds=seconds)
    values.update(learning_rate=learning_rate, save_steps=0, report_to="none", progress=False)
    if arm == DROP_ARM:  # its table's prompt-set fingerprint is the whole pool's
        values["allow_v_star_mismatch"] = True
    return config_type(**values)
