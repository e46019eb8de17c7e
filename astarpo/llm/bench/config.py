"""Configuration of the efficiency benchmark (:func:`~astarpo.llm.bench.run.run_bench`).

:class:`BenchConfig` holds the protocol shared by every run; :func:`arms` lists the runs of one
seed (the algorithms, plus ``astarpo_drop``: A*-PO with the all-wrong prompts of Stage 1 left
out); :func:`algorithm_config` turns the protocol into the registry config of one run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from astarpo.llm.algorithms.registry import ALGORITHMS
from astarpo.llm.algorithms.train_config import TrainConfig
from astarpo.llm.stage1.config import Stage1Config
from astarpo.llm.toy.tasks import TASKS

__all__ = [
    "ARM_LABELS",
    "DROP_ARM",
    "PEER_ARMS",
    "BenchConfig",
    "algorithm_config",
    "arm_algorithm",
    "arms",
    "is_peer_arm",
    "peer_arms",
]

#: The A*-PO variant that trains only on prompts with a Stage 1 pass rate above 0.
DROP_ARM = "astarpo_drop"

#: Runs of another library per ``peers`` entry (:mod:`astarpo.llm.bench.peers`).
PEER_ARMS: dict[str, tuple[str, ...]] = {"trl": ("trl_grpo", "trl_a2po")}

#: Names of the peer runs in the report.
ARM_LABELS: dict[str, str] = {"trl_grpo": "TRL GRPO", "trl_a2po": "TRL A2PO"}


@dataclass(frozen=True)
class BenchConfig:
    """Settings of :func:`~astarpo.llm.bench.run.run_bench` (shared by every run).

    Args:
        out_dir: Output directory (reference, Stage 1 tables, runs, bench.json/md/png).
        task: The embedded task (:data:`~astarpo.llm.toy.tasks.TASKS`): ``"addition"``
            (default; answers of 4-5 tokens), ``"scratchpad"`` (a worked solution of 70
            tokens with EOS) or ``"scratchpad2"`` (2-digit operands: 38 tokens). Its reward
            scores every run, its model shape is the reference's (``model_overrides`` on
            top), and ``max_new_tokens`` must fit its gold responses.
        algos: Algorithms to compare; must include ``"astarpo"`` (the baseline of the ratios).
        drop_all_wrong: Also run ``astarpo_drop`` (A*-PO without the prompts whose N Stage 1
            samples are all wrong). Default True.
        seeds: Seeds 0 .. seeds-1 per run (95% t-intervals over them). Default 3.
        max_train_seconds: Wall-clock budget of every run; A*-PO's Stage 1 is inside it.
            Default 60 (sized so that the default run fits in 45 minutes on 2 shared cores).
        eval_every_seconds: Held-out evaluation every this many seconds of training time
            (evaluation is not counted). Default 5 (one evaluation of 500 held-out problems
            costs about 0.7 s on the toy, so the early targets are read off evaluations rather
            than interpolated over the first 10 s).
        lr_grid: Learning rates of the sweep; each algorithm gets the one chosen by
            :func:`~astarpo.llm.bench.stats.select_lr`. One value: no sweep.
        grid_extensions: When an algorithm's chosen rate is the grid's smallest or largest, the
            sweep tries one more rate beyond that edge (the grid's step further), up to this
            many times per algorithm, so that the chosen rate is bracketed; the report lists the
            rates added. Default 2; 0 never extends.
        sweep_seconds: Budget of each sweep run (Stage 1 reused there). Default 20.
        sweep_seed: Seed of the sweep runs (not one of the main seeds). Default 1000.
        batch_size: Prompts per step. Default 32.
        pool_size: Training prompts (the pool every run draws from, epoch after epoch; A*-PO's
            Stage 1 samples N responses for each, inside its budget). Default 1000.
        eval_size: Held-out prompts (the curves and the hard subset). Default 500.
        val_size: Validation prompts of the sweep (disjoint from both). Default 200.
        max_new_tokens: Token budget per response. Default 5.
        n_samples: Stage 1 reference samples per prompt (N). Default 8 (paper).
        beta1: Stage 1 KL strength. Default 0.5 (paper).
        beta2: A*-PO regression strength. Default 1e-3 (paper).
        group_size: GRPO/RLOO samples per prompt (G). Default 8.
        eta: REBEL's step size. Default 1e3.
        target_fractions: Targets as fractions of the way from the reference's accuracy to the
            best final accuracy of any run. Default 25/50/75%.
        sft_steps: Most SFT steps of the (weak) reference. Default 2000.
        reference_target: SFT stops at the first check (every 5 steps) where the reference's
            expected sampled accuracy on the validation split reaches this, so that the
            curves start from a weak reference and do not saturate within seconds.
            Default 0.35 (issue: held-out sampled pass@1 about 0.3-0.4).
        sft_lr: SFT learning rate. Default 2e-3.
        model_overrides: ``Qwen2Config`` fields for a larger model (empty: the toy default).
        device: ``"cpu"``, ``"cuda"`` or ``"auto"``. Default ``"cpu"``.
        mixed_precision: ``"auto"``, ``"bf16"`` or ``"no"`` (every run).
        threads: Torch CPU threads per run. Default 1 (steadier timings on a shared machine).
        backend: Generation backend of every run, its Stage 1 included: ``"hf"`` (default) or
            ``"vllm"`` (the ``vllm`` extra; the held-out evaluation stays on HF for every run).
        micro_batch_size: Sequences per forward/backward pass of every algorithm (gradient
            accumulation); 0 (default) = each algorithm's whole minibatch at once. A positive
            value is the matched-memory setting: every algorithm's passes take the same number
            of sequences, as micro-batched GPU runs do.
        generation_batch_size: Rows per ``generate`` call of every run. Default 256.
        cache_dir: SFT cache directory (None: ``$ASTARPO_CACHE`` or ``~/.cache/astarpo``).
        peers: Other libraries run under the same protocol: ``("trl",)`` adds TRL's
            ``GRPOTrainer`` and experimental ``A2POTrainer`` (:data:`PEER_ARMS`; needs the
            ``bench-trl`` extra). Default none.
        one_pass: After the main runs, run A*-PO and GRPO (those of ``algos``) again, same
            seeds and learning rates, on a pool large enough that no prompt is seen twice
            within the budget (:func:`~astarpo.llm.bench.one_pass.one_pass_pool_size`, sized
            from the main runs' measured rates), so that A*-PO's Stage 1 is paid for every
            prompt it trains on and not amortised over revisits. Default False.
    """

    out_dir: str = "runs/bench"
    task: str = "addition"
    algos: tuple[str, ...] = ("astarpo", "grpo", "rloo", "ppo", "rebel")
    drop_all_wrong: bool = True
    seeds: int = 3
    max_train_seconds: float = 60.0
    eval_every_seconds: float = 5.0
    lr_grid: tuple[float, ...] = (1e-4, 3e-4, 1e-3)
    grid_extensions: int = 2
    sweep_seconds: float = 20.0
    sweep_seed: int = 1000
    batch_size: int = 32
    pool_size: int = 1000
    eval_size: int = 500
    val_size: int = 200
    max_new_tokens: int = 5
    n_samples: int = 8
    beta1: float = 0.5
    beta2: float = 1e-3
    group_size: int = 8
    eta: float = 1e3
    target_fractions: tuple[float, ...] = (0.25, 0.5, 0.75)
    sft_steps: int = 2000
    reference_target: float = 0.35
    sft_lr: float = 2e-3
    model_overrides: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    mixed_precision: str = "auto"
    threads: int = 1
    backend: str = "hf"
    micro_batch_size: int = 0
    generation_batch_size: int = 256
    cache_dir: str | None = None
    peers: tuple[str, ...] = ()
    one_pass: bool = False

    def __post_init__(self) -> None:
        if self.backend not in ("hf", "vllm"):
            raise ValueError(f"backend must be 'hf' or 'vllm', got {self.backend!r}.")
        for name, note in (("micro_batch_size", " (0: whole batch)"), ("grid_extensions", "")):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an integer >= 0{note}, got {v!r}.")
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {', '.join(TASKS)}, got {self.task!r}.")
        if self.peers and self.task != "addition":
            raise ValueError(
                f"peers run on the addition task only (their reward wrapper scores exact "
                f"answers without EOS); got peers={self.peers!r} with task={self.task!r}."
            )
        if not isinstance(self.peers, tuple) or any(p not in PEER_ARMS for p in self.peers):
            raise ValueError(
                f"peers must be a tuple drawn from {tuple(PEER_ARMS)}, got {self.peers!r}; e.g. "
                "peers=('trl',) (`--peers trl`)."
            )
        if len(set(self.peers)) != len(self.peers):
            raise ValueError(f"peers lists a library twice: {self.peers}.")
        unknown = [a for a in self.algos if a not in ALGORITHMS]
        if unknown or "astarpo" not in self.algos:
            raise ValueError(
                f"algos must be drawn from {tuple(ALGORITHMS)} and include 'astarpo' (the "
                f"baseline of the ratios); got {self.algos}."
            )
        for name in (
            "seeds",
            "batch_size",
            "pool_size",
            "eval_size",
            "val_size",
            "max_new_tokens",
            "n_samples",
            "threads",
            "sft_steps",
            "generation_batch_size",
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}.")
        for name in ("max_train_seconds", "eval_every_seconds", "sweep_seconds", "sft_lr"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}.")
        if not self.lr_grid or any(not (math.isfinite(x) and x > 0) for x in self.lr_grid):
            raise ValueError(f"lr_grid must be non-empty, of numbers > 0, got {self.lr_grid}.")
        if not 0 < self.reference_target < 1:
            raise ValueError(f"reference_target must be in (0, 1), got {self.reference_target}.")
        if not self.target_fractions or any(not 0 < f < 1 for f in self.target_fractions):
            raise ValueError(
                f"target_fractions must be non-empty, each in (0, 1), got {self.target_fractions}."
            )
        need = TASKS[self.task].response_tokens
        if need is not None and isinstance(self.max_new_tokens, int) and self.max_new_tokens < need:
            raise ValueError(
                f"max_new_tokens={self.max_new_tokens} cannot hold the {self.task} task's gold "
                f"responses ({need} tokens with EOS); raise it to at least {need}."
            )
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2, got {self.group_size}.")
        if self.sweep_seed < self.seeds:
            raise ValueError(
                f"sweep_seed ({self.sweep_seed}) must not be one of the main seeds "
                f"0..{self.seeds - 1}."
            )

    def stage1_config(self, seed: int, filter_all_wrong: bool = False) -> Stage1Config:
        """Stage 1's settings under this protocol: N, ``beta1`` and the token budget of the
        runs, ``generation_batch_size`` sequences per ``generate`` call, no progress bar."""
        return Stage1Config(
            n_samples=self.n_samples,
            beta1=self.beta1,
            max_new_tokens=self.max_new_tokens,
            seed=seed,
            prompts_per_call=max(1, self.generation_batch_size // self.n_samples),
            filter_all_wrong=filter_all_wrong,
            progress=False,
        )

    def resolved(self) -> BenchConfig:
        """This protocol with ``out_dir`` and ``cache_dir`` made absolute (against the current
        directory), so that a run spec written from it reads the same in a worker started in
        another directory."""
        out = str(Path(self.out_dir).expanduser().resolve())
        cache = None if self.cache_dir is None else str(Path(self.cache_dir).expanduser().resolve())
        return replace(self, out_dir=out, cache_dir=cache)

    @property
    def sweep(self) -> bool:
        """True when there is more than one learning rate to choose from."""
        return len(self.lr_grid) > 1


def peer_arms(cfg: BenchConfig) -> tuple[str, ...]:
    """The runs of the other libraries of ``cfg.peers`` (:data:`PEER_ARMS`)."""
    return tuple(arm for p in cfg.peers for arm in PEER_ARMS[p])


def is_peer_arm(arm: str) -> bool:
    """True for a run of another library (:data:`PEER_ARMS`)."""
    return any(arm in names for names in PEER_ARMS.values())


def arms(cfg: BenchConfig) -> tuple[str, ...]:
    """The runs of one seed: ``cfg.algos``, :data:`DROP_ARM` with ``drop_all_wrong``, then the
    peer runs (:func:`peer_arms`)."""
    own = (*cfg.algos, DROP_ARM) if cfg.drop_all_wrong else tuple(cfg.algos)
    return (*own, *peer_arms(cfg))


def arm_algorithm(arm: str) -> str:
    """The registry algorithm of a run name (``astarpo_drop`` is A*-PO; a peer run is itself)."""
    return "astarpo" if arm == DROP_ARM else arm


def algorithm_config(
    arm: str, cfg: BenchConfig, seed: int, out: Path, learning_rate: float, seconds: float
) -> TrainConfig:
    """The registry config of run ``arm`` (an algorithm or :data:`DROP_ARM`).

    Every run gets the same loop fields (budget, evaluation schedule, sampling, generation
    batch); the algorithm-specific settings of :class:`BenchConfig` (``beta2``,
    ``group_size``, ``eta``) go to the algorithms whose config has that field; :data:`DROP_ARM`
    trains on a subset of its Stage 1 table's prompts (``allow_v_star_mismatch``). ``max_steps`` is
    left unbounded: the wall-clock budget ``seconds`` stops the run.

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
    )
    if arm == DROP_ARM:
        # Trains on the subset of the pool its Stage 1 table solved at least once: the table's
        # prompt-set fingerprint is the whole pool's, a deliberate mismatch.
        values["allow_v_star_mismatch"] = True
    own = {f.name for f in fields(config_type)}
    for extra in ("beta2", "group_size", "eta"):
        if extra in own:
            values[extra] = getattr(cfg, extra)
    return config_type(**values)
