"""The training protocol a study's runs share (:class:`Protocol`): the task, its splits and the
library configs every run trains under (``train``, each algorithm's, ``stage1``, ``sft``); from
a protocol, :func:`splits` (the task's fixed rows), :func:`make_reference` (the weak SFT
reference) and :func:`algorithm_config` (a run's).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from astarpo import doc_field
from astarpo.llm import (
    ALGORITHMS,
    AStarPOConfig,
    GRPOConfig,
    PPOConfig,
    REBELConfig,
    RLOOConfig,
    SFTConfig,
    Stage1Config,
    TrainConfig,
    cached_sft,
    get_task,
    make_char_tokenizer,
    make_toy_model,
    resolve_device,
)
from astarpo.llm import TASKS as TOY_TASKS
from experiments.harness.config import StudyConfig, check_choices, check_integers, nested

__all__ = [
    "DROP_ARM",
    "LOOP_FIELDS",
    "PAPER_SHAPE",
    "STAGE1_ARMS",
    "Protocol",
    "algorithm_config",
    "arm_algorithm",
    "check_backend",
    "make_reference",
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

#: The training settings of every run on the paper protocol (its section 5: 2 minibatches per
#: batch, entropy bonus 0.001, gradient clip 1.0; N, G, beta1 and beta2 are the protocol's).
PAPER_SHAPE: dict[str, Any] = dict(minibatches=2, entropy_coef=1e-3, max_grad_norm=1.0)

#: The fields of ``TrainConfig`` (every algorithm's loop): an algorithm's config of the
#: protocol takes them from its ``train``.
LOOP_FIELDS = tuple(f.name for f in fields(TrainConfig))

#: The loop of every run (the fields it sets besides the library's defaults).
TRAIN = TrainConfig(
    batch_size=32,
    max_new_tokens=5,
    eval_every_seconds=5.0,
    device="cpu",
    backend="hf",
    generation_batch_size=256,
    save_steps=0,
    report_to="none",
    progress=False,
)
#: The settings of ``train`` every study has.
TRAIN_FLAGS = (
    "batch_size",
    "max_new_tokens",
    "eval_every_seconds",
    "device",
    "mixed_precision",
    "backend",
    "micro_batch_size",
    "generation_batch_size",
    "reward_timeout",
)


@dataclass(frozen=True)
class Protocol(StudyConfig):
    """The protocol every run of a study trains under: the task and its splits (own fields),
    and the library's configs: ``train`` (the loop of every run), each algorithm's config (its
    own fields; the loop fields are ``train``'s), ``stage1`` (Stage 1: N and beta1; the
    sampling, reward deadline and prompts per call are ``train``'s) and ``sft`` (the weak
    reference's fine-tuning).
    """

    task: str = doc_field(
        "addition",
        "The task: addition (answers of 3 digits and EOS: 4 tokens), scratchpad (worked "
        "solutions of 70 tokens with EOS) or scratchpad2 (2-digit operands: 38 tokens).",
        choices=tuple(TOY_TASKS),
    )
    pool_size: int = doc_field(1000, "Training prompts: the pool every run draws from.")
    eval_size: int = doc_field(500, "Held-out prompts (the curves and the hard subset).")
    val_size: int = doc_field(200, "Validation prompts of a sweep (disjoint from both).")
    model_overrides: dict[str, Any] = doc_field(
        {}, "Qwen2Config fields over the task's model (JSON)."
    )
    cache_dir: str | None = doc_field(
        None, "SFT cache (default $ASTARPO_CACHE or ~/.cache/astarpo)."
    )
    train: TrainConfig = nested(TRAIN, TRAIN_FLAGS)
    stage1: Stage1Config = nested(Stage1Config(progress=False), ("n_samples", "beta1"))
    astarpo: AStarPOConfig = nested(AStarPOConfig(), ("beta2",))
    grpo: GRPOConfig = nested(GRPOConfig(), ("group_size",))
    rloo: RLOOConfig = nested(RLOOConfig(), ("group_size",))
    ppo: PPOConfig = nested(PPOConfig())
    rebel: REBELConfig = nested(REBELConfig(eta=1e3), ("eta",))
    sft: SFTConfig = nested(
        SFTConfig(steps=2000, learning_rate=2e-3, target_accuracy=0.35),
        {"sft_steps": "steps", "sft_lr": "learning_rate", "reference_target": "target_accuracy"},
    )

    def __post_init__(self) -> None:
        """Check the own fields and make every algorithm's config and ``stage1`` take
        ``train``'s loop (``ValueError`` naming what is wrong)."""
        super().__post_init__()
        check_choices(self)
        check_integers(self, pool_size=1, eval_size=1, val_size=1)
        if self.train.backend not in ("hf", "vllm"):
            raise ValueError(f"backend must be 'hf' or 'vllm', got {self.train.backend!r}.")
        if not self.train.eval_every_seconds > 0:
            raise ValueError(
                f"eval_every_seconds must be a finite number > 0, got "
                f"{self.train.eval_every_seconds!r}."
            )
        if not isinstance(self.model_overrides, dict):
            raise ValueError(f"model_overrides must be a dict, got {self.model_overrides!r}.")
        if not isinstance(self.sft.target_accuracy, float):
            raise ValueError(
                f"reference_target must be a number in (0, 1), got {self.sft.target_accuracy!r}."
            )
        need = TOY_TASKS[self.task].response_tokens
        if need is not None and self.train.max_new_tokens < need:
            raise ValueError(
                f"max_new_tokens={self.train.max_new_tokens} cannot hold the {self.task} task's "
                f"gold responses ({need} tokens with EOS); raise it to at least {need}."
            )
        loop = {name: getattr(self.train, name) for name in LOOP_FIELDS}
        for f in fields(self):
            if f.name != "train" and isinstance(getattr(self, f.name), TrainConfig):
                object.__setattr__(self, f.name, replace(getattr(self, f.name), **loop))
        object.__setattr__(self, "stage1", self.stage1_config(self.stage1.seed))

    def stage1_config(self, seed: int, arm: str = "astarpo") -> Stage1Config:
        """Stage 1 of run ``arm`` under this protocol (about ``generation_batch_size``
        sequences per call): ``n_samples`` per prompt, or the rule of ``arm`` in
        :data:`STAGE1_ARMS` (mean ``n = max(1, round(fraction * n_samples))``; adaptive: a
        pilot of ``max(1, n // 2)``, at most ``4 n_samples`` per prompt)."""
        allocation, fraction = STAGE1_ARMS.get(arm, ("fixed", 1.0))
        n = max(1, round(fraction * self.stage1.n_samples))
        return replace(
            self.stage1,
            n_samples=n,
            max_new_tokens=self.train.max_new_tokens,
            seed=seed,
            prompts_per_call=max(1, self.train.generation_batch_size // n),
            allocation=allocation,
            pilot_samples=max(1, n // 2),
            max_samples=max(n, 4 * self.stage1.n_samples),
            reward_timeout=self.train.reward_timeout,
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
    """The task's toy model fine-tuned (``cfg.sft``, or read from the SFT cache) on
    ``cfg.train.device`` until its expected accuracy on the check rows reaches
    ``reference_target``, saved with its tokenizer
    to ``out/reference`` and named by its absolute path (``config._name_or_path``: the
    name a Stage 1 table made with it records, which the runs that load that folder check).
    Returns ``(model in eval mode, SFT info)``."""
    tokenizer = make_char_tokenizer()
    rows = splits(cfg)
    shape = {**get_task(cfg.task).model, **cfg.model_overrides}
    model = make_toy_model(tokenizer, seed=REF_SEED, **shape)
    model = model.to(resolve_device(cfg.train.device))
    model, info = cached_sft(
        model, tokenizer, rows["sft"], cfg.sft, cfg.cache_dir, False, check_rows=rows["check"]
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
    """The config of run ``arm`` (an algorithm, ``ValueError`` for another name, or
    :data:`DROP_ARM`: ``allow_v_star_mismatch``, a subset of its Stage 1 table): the
    protocol's config of its algorithm with ``seed``, ``learning_rate`` and a budget of
    ``seconds`` (``max_steps`` unbounded), writing to ``out``."""
    name = arm_algorithm(arm)
    if name not in ALGORITHMS or not isinstance(getattr(cfg, name, None), TrainConfig):
        raise ValueError(f"unknown algorithm {name!r}; expected one of {', '.join(ALGORITHMS)}.")
    config: TrainConfig = getattr(cfg, name)
    config = replace(config, output_dir=str(out), seed=seed, max_steps=10**9)
    config = replace(config, max_train_seconds=seconds, learning_rate=learning_rate)
    if arm == DROP_ARM:  # its table's prompt-set fingerprint is the whole pool's
        config = replace(config, allow_v_star_mismatch=True)
    return config
