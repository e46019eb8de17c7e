"""The training protocol the runs of an LLM study share, and what is made from it.

:class:`RunOptions` says how a study's runs are started (torch threads, a slowed run re-run);
:class:`Protocol` adds what every run trains under (task, sizes, sampling, the algorithms'
settings, the SFT reference, device and backend), so that a study's runs differ only in what
it varies. Every field's ``help`` metadata gives its meaning (``astarpo study NAME --help``
shows each with its default). From a protocol: :func:`splits` (the task's fixed rows),
:func:`make_reference` (the weak SFT reference, cached), :func:`algorithm_config` (the
registry config of one run) and :meth:`Protocol.stage1_config`. The checks
(:func:`check_ints`, :func:`check_positive`) serve the studies' own configs too.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import typing
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from astarpo.llm.algorithms.config import TrainConfig, check_choice, doc_field
from astarpo.llm.algorithms.registry import ALGORITHMS
from astarpo.llm.models.toy import make_char_tokenizer, make_toy_model
from astarpo.llm.parallel.dist import resolve_device
from astarpo.llm.stage1.config import Stage1Config
from astarpo.llm.toy.sft import SFTConfig, cached_sft
from astarpo.llm.toy.tasks import TASKS, get_task

__all__ = [
    "DROP_ARM",
    "Protocol",
    "RunOptions",
    "algorithm_config",
    "arm_algorithm",
    "check_backend",
    "check_ints",
    "check_positive",
    "config_from_dict",
    "make_reference",
    "splits",
]

#: The A*-PO run that trains only on the prompts its Stage 1 solved at least once.
DROP_ARM = "astarpo_drop"

#: The task's problems, drawn once: the first ``HELD`` are the held-out region (held-out rows
#: first, validation rows from ``VAL_START``, whose first ``CHECK`` are also the reference's
#: stopping check), the next ``SFT`` the SFT data, whose first ``pool_size`` rows are the
#: training pool. Pinned so that a result stays reproducible.
REF_SEED, HELD, SFT, VAL_START, CHECK = 0, 1000, 8000, 500, 200
SFT_BATCH = 64


def check_ints(cfg: Any, *names: str, low: int = 1) -> None:
    """Raise ``ValueError`` unless each field ``names`` of ``cfg`` is an integer >= ``low``."""
    for name in names:
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {v!r}.")


def check_positive(cfg: Any, *names: str) -> None:
    """Raise ``ValueError`` unless each field ``names`` of ``cfg`` is a finite number > 0."""
    for name in names:
        v = getattr(cfg, name)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        if not (ok and v > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {v!r}.")


def config_from_dict(cls: type, values: dict[str, Any]) -> Any:
    """A config dataclass back from ``dataclasses.asdict`` / JSON (its tuples restored)."""
    hints = typing.get_type_hints(cls)
    tuples = {f.name for f in fields(cls) if typing.get_origin(hints[f.name]) is tuple}
    return cls(**{k: tuple(v) if k in tuples else v for k, v in values.items()})


@dataclass(frozen=True)
class RunOptions:
    """How the runs of a study are started (the fields every study config has)."""

    threads: int = doc_field(1, "Torch CPU threads per run (1: steadier timings when shared).")
    rerun_slow: bool = doc_field(
        False,
        "Run again, once, a run whose CPU time over wall time is below 0.9 (its core was "
        "shared); every run's result records the ratio and flags it either way.",
    )

    def __post_init__(self) -> None:
        check_ints(self, "threads")


@dataclass(frozen=True)
class Protocol(RunOptions):
    """The protocol every run of a study trains under (see each field's ``help``)."""

    task: str = field(
        default="addition",
        metadata={
            "help": "The embedded task: addition (answers of 4-5 tokens), scratchpad (a worked "
            "solution of 70 tokens with EOS) or scratchpad2 (2-digit operands: 38 tokens).",
            "choices": tuple(TASKS),
        },
    )
    batch_size: int = doc_field(32, "Prompts per step.")
    pool_size: int = doc_field(1000, "Training prompts: the pool every run draws from.")
    eval_size: int = doc_field(500, "Held-out prompts (the curves and the hard subset).")
    val_size: int = doc_field(200, "Validation prompts of a sweep (disjoint from both).")
    max_new_tokens: int = doc_field(5, "Token budget per response (EOS included).")
    eval_every_seconds: float = doc_field(
        5.0, "Held-out evaluation every this many seconds of training time (not counted)."
    )
    n_samples: int = doc_field(8, "Stage 1 reference samples per prompt (N; the paper: 8).")
    beta1: float = doc_field(0.5, "Stage 1 KL strength (the paper: 0.5).")
    beta2: float = doc_field(1e-3, "A*-PO regression strength (the paper: 1e-3).")
    group_size: int = doc_field(8, "GRPO/RLOO samples per prompt (G), >= 2.")
    eta: float = doc_field(1e3, "REBEL's step size.")
    sft_steps: int = doc_field(2000, "Most SFT steps of the (weak) reference.")
    reference_target: float = doc_field(
        0.35,
        "SFT stops at the first check (every 5 steps) where the reference's expected sampled "
        "accuracy on 200 validation problems reaches this, in (0, 1): a weak reference.",
    )
    sft_lr: float = doc_field(2e-3, "SFT learning rate.")
    model_overrides: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "Qwen2Config fields over the task's toy model, as JSON ({}: none)."},
    )
    device: str = doc_field("cpu", "Device of every run: cpu, cuda or auto.")
    mixed_precision: str = doc_field("auto", "Mixed precision of every run: auto, bf16 or no.")
    backend: str = field(
        default="hf",
        metadata={
            "help": "Generation backend of every run, Stage 1 included (the held-out "
            "evaluation stays on HF); vllm needs the vllm extra.",
            "choices": ("hf", "vllm"),
        },
    )
    micro_batch_size: int = doc_field(
        0,
        "Sequences per forward/backward pass of every algorithm (0: each one's whole "
        "minibatch); a positive value is the matched-memory setting.",
    )
    generation_batch_size: int = doc_field(256, "Rows per generate call of every run.")
    reward_timeout: float = doc_field(
        600.0, "Deadline in seconds of a reward call, in training and evaluation (0: none)."
    )
    cache_dir: str | None = doc_field(
        None, "SFT cache folder (default: $ASTARPO_CACHE or ~/.cache/astarpo)."
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self, "task", tuple(TASKS))
        check_choice(self, "backend", ("hf", "vllm"))
        check_ints(self, "batch_size", "pool_size", "eval_size", "val_size", "max_new_tokens")
        check_ints(self, "n_samples", "group_size", "sft_steps", "generation_batch_size")
        check_ints(self, "micro_batch_size", low=0)
        check_positive(self, "eval_every_seconds", "beta1", "beta2", "eta", "sft_lr")
        if not 0 < self.reference_target < 1:
            raise ValueError(f"reference_target must be in (0, 1), got {self.reference_target}.")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2, got {self.group_size}.")
        if not isinstance(self.model_overrides, dict):
            raise ValueError(f"model_overrides must be a dict, got {self.model_overrides!r}.")
        need = TASKS[self.task].response_tokens
        if need is not None and self.max_new_tokens < need:
            raise ValueError(
                f"max_new_tokens={self.max_new_tokens} cannot hold the {self.task} task's gold "
                f"responses ({need} tokens with EOS); raise it to at least {need}."
            )

    def stage1_config(self, seed: int, filter_all_wrong: bool = False) -> Stage1Config:
        """Stage 1 under this protocol: N, ``beta1``, the runs' token budget, about
        ``generation_batch_size`` sequences per ``generate`` call, no progress bar."""
        return Stage1Config(
            n_samples=self.n_samples,
            beta1=self.beta1,
            max_new_tokens=self.max_new_tokens,
            seed=seed,
            prompts_per_call=max(1, self.generation_batch_size // self.n_samples),
            reward_timeout=self.reward_timeout,
            filter_all_wrong=filter_all_wrong,
            progress=False,
        )

    def resolved(self) -> Any:
        """This config with ``cache_dir`` absolute, so that a run spec made from it reads the
        same in a worker started in another folder."""
        cache = self.cache_dir and str(Path(self.cache_dir).expanduser().resolve())
        return replace(self, cache_dir=cache)


def splits(cfg: Protocol) -> dict[str, list[dict[str, str]]]:
    """``{"sft", "pool", "held_out", "val", "check"}`` rows of ``cfg.task``: disjoint but for
    the pool (the first ``pool_size`` SFT rows) and the check rows (the first validation ones).

    Raises:
        ValueError: ``pool_size``, ``eval_size`` or ``val_size`` exceeds its region.
    """
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
    to ``out/reference``. Returns ``(model in eval mode, SFT info)``."""
    tokenizer = make_char_tokenizer()
    rows = splits(cfg)
    model = make_toy_model(
        tokenizer, seed=REF_SEED, **{**get_task(cfg.task).model, **cfg.model_overrides}
    ).to(resolve_device(cfg.device))
    sft_cfg = SFTConfig(cfg.sft_steps, SFT_BATCH, cfg.sft_lr, target_accuracy=cfg.reference_target)
    model, info = cached_sft(
        model, tokenizer, rows["sft"], sft_cfg, cfg.cache_dir, False, check_rows=rows["check"]
    )
    model.save_pretrained(out / "reference")
    tokenizer.save_pretrained(out / "reference")
    return model.eval(), info


def check_backend(backend: str) -> None:
    """Refuse ``backend="vllm"`` without vLLM, before any work.

    Raises:
        RuntimeError: vLLM is not installed (the message says how to install it).
    """
    if backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise RuntimeError(
            "--backend vllm needs vLLM, which is not installed in this environment; install "
            "the vllm extra (`make vllm-install` builds .venv-vllm) or use --backend hf."
        )


def arm_algorithm(arm: str) -> str:
    """The registry algorithm of a run name (:data:`DROP_ARM` is A*-PO; others are themselves)."""
    return "astarpo" if arm == DROP_ARM else arm


def algorithm_config(
    arm: str, cfg: Protocol, seed: int, out: Path, learning_rate: float, seconds: float
) -> TrainConfig:
    """The registry config of run ``arm`` (an algorithm or :data:`DROP_ARM`).

    Every run gets the same loop fields (budget ``seconds``, evaluation schedule, sampling,
    generation batch, device); ``beta2``, ``group_size`` and ``eta`` go to the algorithms whose
    config has that field; :data:`DROP_ARM` trains on a subset of its Stage 1 table's prompts
    (``allow_v_star_mismatch``). ``max_steps`` is unbounded: the budget stops the run.

    Raises:
        ValueError: ``arm`` names no algorithm of the registry.
    """
    name = arm_algorithm(arm)
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; expected one of {', '.join(ALGORITHMS)}.")
    config_type = ALGORITHMS[name].config
    values: dict[str, Any] = dict(
        output_dir=str(out),
        seed=seed,
        max_steps=10**9,
        max_train_seconds=seconds,
        eval_every_seconds=cfg.eval_every_seconds,
        batch_size=cfg.batch_size,
        learning_rate=learning_rate,
        max_new_tokens=cfg.max_new_tokens,
        save_steps=0,
        device=cfg.device,
        mixed_precision=cfg.mixed_precision,
        report_to="none",
        progress=False,
        generation_batch_size=cfg.generation_batch_size,
        backend=cfg.backend,
        micro_batch_size=cfg.micro_batch_size,
        reward_timeout=cfg.reward_timeout,
    )
    if arm == DROP_ARM:  # its table's prompt-set fingerprint is the whole pool's
        values["allow_v_star_mismatch"] = True
    own = {f.name for f in dataclasses.fields(config_type)}
    values.update({k: getattr(cfg, k) for k in ("beta2", "group_size", "eta") if k in own})
    return config_type(**values)
