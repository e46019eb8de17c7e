"""The ladder-train study's settings (:class:`LadderTrainConfig`), its rates (:func:`rates`),
its runs (:func:`plan`) and ``--quick``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from astarpo import doc_field
from astarpo.llm import ALGORITHMS, TrainConfig
from experiments.harness.config import check_integers, nested
from experiments.harness.ladder_sets import BINS, PROTOCOL, LadderConfig, bin_label, bin_labels
from experiments.harness.ladder_sets import QUICK as LADDER_QUICK
from experiments.harness.protocol import DROP_ARM, TRAIN, TRAIN_FLAGS, Protocol, arm_algorithm

__all__ = ["ALONE", "ARMS", "LADDER_BINS", "MIXED", "PAPER_RATES", "QUICK"]
__all__ += ["SCRATCHPAD", "LadderTrainConfig", "parse_rates", "plan", "presets", "rates"]
__all__ += ["run_name"]

#: The ladder bins the study builds the ladder on when no ``ladder`` folder is given.
LADDER_BINS = BINS
#: The ladder the study builds when no ``ladder`` folder is given (its bins: those of
#: :data:`LADDER_BINS` that ``bins`` and ``easy`` name).
LADDER = LadderConfig(top_ups=LADDER_QUICK["top_ups"])
#: The run names the study knows (A*-PO, its all-wrong filter, the baselines).
ARMS = ("astarpo", "grpo", DROP_ARM, "ppo", "rebel")
#: The two training sets: the bin's training prompts alone, or with the easy bin's.
ALONE, MIXED = "alone", "mixed"
#: The learning rates the 120-step paper-protocol sweep chose (docs/figures/paper_protocol_120.json,
#: key ``sweep``: the efficiency study's ``--protocol paper`` on the scratchpad task, 3 seeds
#: disjoint from the measured ones, the grid 1e-4 .. 1e-3 extended once to 3.33e-5). GRPO's
#: 1e-4 is bracketed there; A*-PO's, PPO's and REBEL's 3.33e-5 is still the grid's lower edge
#: after the extension, so a ladder run that needs bracketed rates sweeps them (``lr_grid``).
PAPER_RATES = ("astarpo=3.33e-05", "grpo=0.0001", "ppo=3.33e-05", "rebel=3.33e-05")

_SEEDS = "Seeds 0 .. n-1 of {} (95% t-intervals over them)."


def parse_rates(items: tuple[str, ...]) -> dict[str, float]:
    """``{name: rate}`` of ``("astarpo=3e-5", ...)`` (a registry algorithm or a run name).

    Raises:
        ValueError: an item that is not ``NAME=RATE`` with a known name and a finite rate > 0,
            or a name given twice.
    """
    out: dict[str, float] = {}
    for item in items:
        name, _, text = str(item).partition("=")
        try:
            rate = float(text)
        except ValueError:
            rate = math.nan
        if name not in (*ALGORITHMS, *ARMS) or not (math.isfinite(rate) and rate > 0):
            raise ValueError(
                f"lrs: {item!r} is not NAME=RATE with NAME an algorithm or run "
                f"({', '.join(dict.fromkeys((*ARMS, *ALGORITHMS)))}) and RATE > 0; e.g. "
                "--lrs astarpo=3.33e-5,grpo=1e-4."
            )
        if name in out:
            raise ValueError(f"lrs gives {name!r} twice: {items!r}.")
        out[name] = rate
    return out


@dataclass(frozen=True)
class LadderTrainConfig(Protocol):
    """Settings of :func:`~experiments.ladder_train.run.run` (each field's help says what it
    does).

    Every run trains for ``steps`` steps (``train.max_steps``) on one training set: a bin's
    training prompts (``alone``) or the easy bin's and a near bin's together (``mixed``),
    evaluated exactly on the bin's and the easy bin's held-out prompts, in the paper's shape
    (:data:`~experiments.harness.protocol.PAPER_SHAPE`: 2 minibatches, clip 1.0) with the
    entropy bonus ``entropy_coef`` (0.001, the paper's; with every reward 0 it is the only
    gradient left).

    Equal steps, not seconds: the result does not depend on the machine's load. The rule of the
    default 100 steps: 4 x the expected steps to GRPO's first success on the deepest default
    near bin, 1 / (batch_size x group_size x 10^-3.5) = 25 at 16 prompts and G = 8, so that a
    method that samples successes there has 3/4 of its budget to learn from them (A*-PO, 1
    sample per prompt, expects 100 x 16 x 10^-2.5 = 5 successes on [-2,-3) in that budget).
    """

    ladder: str = doc_field(
        "",
        "A finished `python -m experiments.ladder` folder holding the bins below; empty: build "
        "the ladder into OUT/ladder on the bins of " + ",".join(LADDER_BINS) + " that bins and "
        "easy name.",
    )
    ladder_build: LadderConfig = nested(
        LADDER,
        {"ladder_prompts": ("train", "test"), "ladder_candidates": "candidates", "ladder_k": "k"},
    )
    bins: tuple[str, ...] = doc_field(
        ("[0,-1)", "[-1,-2)", "[-2,-3)", "[-3,-4)", "[-4,-6)", "<=-30"),
        "Ladder bins every main arm trains on alone: labels as `python -m experiments.ladder` "
        "writes them, or its HI:LO bins (on the command line with '=': --bins=0:-1,-30:-inf).",
    )
    near: tuple[str, ...] = doc_field(
        ("[-2,-3)", "[-3,-4)"),
        "The bins nearest the threshold, among `bins`: the side arms train on them alone, and "
        "the mixed arms on each mixed with the easy bin's training prompts.",
    )
    easy: str = doc_field(
        "[0,-1)",
        "The easy bin: its training prompts are mixed in; its held-out prompts are the easy "
        "held-out set of every run.",
    )
    main_arms: tuple[str, ...] = doc_field(
        ("astarpo", "grpo"), "Runs on every bin alone (seeds_main seeds each)."
    )
    side_arms: tuple[str, ...] = doc_field(
        (DROP_ARM, "ppo", "rebel"),
        "Runs on the near bins alone (seeds_side seeds each); astarpo_drop is A*-PO on the "
        "prompts its Stage 1 solved at least once.",
    )
    mixed_arms: tuple[str, ...] = doc_field(
        ("astarpo", "grpo"),
        "Runs on each near bin mixed with the easy bin (seeds_main seeds for a main arm, "
        "seeds_side for a side arm).",
    )
    seeds_main: int = doc_field(5, _SEEDS.format("a main arm"))
    seeds_side: int = doc_field(3, _SEEDS.format("a side arm"))
    train: TrainConfig = nested(
        replace(TRAIN, max_steps=100, entropy_coef=1e-3, eval_steps=20),
        {
            **{name: name for name in TRAIN_FLAGS},
            "steps": "max_steps",
            "entropy_coef": "entropy_coef",
            "eval_steps": "eval_steps",
        },
    )
    train_eval_rows: int = doc_field(
        64, "Training prompts of the bin evaluated too (the sweep's score; 0: none)."
    )
    lrs: tuple[str, ...] = doc_field(
        PAPER_RATES,
        "Learning rate per algorithm or run, NAME=RATE (astarpo_drop: astarpo's unless given). "
        "Defaults: the rates the 120-step paper-protocol sweep chose "
        "(docs/figures/paper_protocol_120.json): "
        "tuned on the efficiency study's scratchpad pool, not per bin.",
    )
    lr_grid: tuple[float, ...] = doc_field(
        (),
        "Rates of an optional sweep per algorithm (empty: none, the lrs are used): runs on "
        "sweep_bin alone on seeds sweep_seed.., scored by the mean expected accuracy on that "
        "bin's training prompts over the steps; an edge choice extended once. The default "
        "sweep_bin has V-hat* = 0 on most prompts, so it cannot see a rate at which A*-PO is "
        "unstable where V-hat* > 0 (docs/zero_pass.md: 1e-4 is chosen and collapses the easy bin).",
    )
    sweep_bin: str = doc_field("[-2,-3)", "The bin of the sweep's runs.")
    sweep_seed: int = doc_field(1000, "First seed of the sweep runs (disjoint from the measured).")
    sweep_seeds: int = doc_field(1, "Seeds of each sweep score (their mean).")
    workers: int = doc_field(1, "Runs at once (one process each; results do not depend on it).")

    def __post_init__(self) -> None:
        """Check the fields (``ValueError`` naming the first that is wrong)."""
        super().__post_init__()
        check_integers(self, seeds_main=1, seeds_side=1, train_eval_rows=0, sweep_seed=0)
        check_integers(self, sweep_seeds=1, workers=1)
        if self.train.eval_steps < 1:
            raise ValueError(f"eval_steps must be an integer >= 1, got {self.train.eval_steps}.")
        for name in ("bins", "near", "easy", "sweep_bin"):
            v = getattr(self, name)
            labels = bin_labels(v) if isinstance(v, (str, tuple)) else v
            object.__setattr__(self, name, labels[0] if isinstance(v, str) else labels)
        for name in ("bins", "near", "main_arms", "side_arms", "mixed_arms"):
            v = getattr(self, name)
            if not isinstance(v, tuple) or len(set(v)) != len(v):
                raise ValueError(f"{name} must be a tuple without repeats, got {v!r}.")
        if not self.bins:
            raise ValueError("bins must name at least one ladder bin.")
        if not set(self.near) <= set(self.bins) or self.easy in self.near:
            raise ValueError(
                f"near {self.near!r} must be bins of {self.bins!r}, other than easy "
                f"({self.easy!r})."
            )
        for name in ("main_arms", "side_arms", "mixed_arms"):
            bad = [a for a in getattr(self, name) if a not in ARMS]
            if bad:
                raise ValueError(f"{name}: unknown runs {bad}; expected some of {ARMS}.")
        if set(self.main_arms) & set(self.side_arms):
            raise ValueError("main_arms and side_arms must not share a run.")
        if not self.main_arms:
            raise ValueError("main_arms must hold at least one run.")
        missing = [a for a in self.arms() if arm_algorithm(a) not in parse_rates(self.lrs)]
        if missing and not (len(self.lr_grid) > 1):
            raise ValueError(f"lrs gives no rate for {missing}; add NAME=RATE (or an lr_grid).")
        if any(not (math.isfinite(x) and x > 0) for x in self.lr_grid):
            raise ValueError(f"lr_grid must hold numbers > 0, got {self.lr_grid!r}.")
        if len(self.lr_grid) > 1 and not self.train_eval_rows:
            raise ValueError("lr_grid scores on the bin's training prompts: train_eval_rows > 0.")
        if self.lr_grid and self.sweep_bin not in self.bins:
            raise ValueError(f"sweep_bin {self.sweep_bin!r} must be one of bins {self.bins!r}.")
        if self.sweep_seed < max(self.seeds_main, self.seeds_side):
            raise ValueError(
                f"sweep_seed ({self.sweep_seed}) must not be a measured seed (0 .. "
                f"{max(self.seeds_main, self.seeds_side) - 1})."
            )

    def arms(self) -> tuple[str, ...]:
        """Every run name of the study, in :data:`ARMS` order."""
        used = {*self.main_arms, *self.side_arms, *self.mixed_arms}
        return tuple(a for a in ARMS if a in used)

    def seeds_of(self, arm: str) -> int:
        """``seeds_main`` for a main arm, ``seeds_side`` otherwise."""
        return self.seeds_main if arm in self.main_arms else self.seeds_side

    def ladder_config(self) -> LadderConfig:
        """The ladder the study builds when no ``ladder`` folder is given: ``ladder_build`` on
        the bins of :data:`LADDER_BINS` that ``bins`` and ``easy`` name (``ValueError`` for a
        label outside them), with long candidates where ``<=-30`` is one."""
        labels, n = {*self.bins, self.easy}, self.ladder_build.train
        specs = tuple(s for s in LADDER_BINS if bin_label(s) in labels)
        missing = sorted(labels - {bin_label(s) for s in specs})
        if missing:
            raise ValueError(
                f"bins {missing} are not among the ladder's {[bin_label(s) for s in LADDER_BINS]} "
                "that this study builds; build `python -m experiments.ladder` on them and pass "
                "--ladder DIR."
            )
        return self.ladder_build.replace(
            bins=specs, threads=self.threads, long_candidates=5 * n if "-30:-inf" in specs else 1
        )


def rates(cfg: LadderTrainConfig, chosen: Mapping[str, float] | None = None) -> dict[str, float]:
    """The rate of every run of ``cfg``: ``chosen`` (a sweep's, by algorithm) over ``lrs`` (a
    run name over its algorithm)."""
    given = {**parse_rates(cfg.lrs), **(chosen or {})}
    return {a: given.get(a, given.get(arm_algorithm(a), math.nan)) for a in cfg.arms()}


def plan(cfg: LadderTrainConfig) -> list[tuple[str, str, str, int]]:
    """``(name, bin, set, seed)`` of every measured run, seed-major (so that a load change hits
    every run name): the main arms on every bin alone, the side arms on the near bins alone,
    the mixed arms on the near bins mixed."""
    groups = [(a, b, ALONE) for b in cfg.bins for a in cfg.main_arms]
    groups += [(a, b, ALONE) for b in cfg.near for a in cfg.side_arms]
    groups += [(a, b, MIXED) for b in cfg.near for a in cfg.mixed_arms]
    top = max(cfg.seeds_main, cfg.seeds_side)
    return [(a, b, s, seed) for seed in range(top) for a, b, s in groups if seed < cfg.seeds_of(a)]


def run_name(arm: str, label: str, set_name: str, seed: int) -> str:
    """The folder name of a run: ``astarpo-m2_m3-alone-seed0`` (bin ``[-2,-3)``)."""
    slug = label.replace("[", "").replace(")", "").replace(",", "_").replace("<=", "le")
    return f"{arm}-{slug.replace('-', 'm')}-{set_name}-seed{seed}"


#: The scratchpad task with the ladder's token budget (its 5-digit bin's gold responses).
SCRATCHPAD: dict[str, Any] = dict(task="scratchpad", sft_lr=3e-3, batch_size=16)
SCRATCHPAD["max_new_tokens"] = PROTOCOL.train.max_new_tokens
#: ``--quick``: every code path in about 5 minutes on a loaded machine: a ladder of the easy bin
#: and one near bin from few candidates, 4 + 4 prompts each; that bin alone (A*-PO, 2 seeds; GRPO
#: and the side arms, 1 seed) and mixed (A*-PO, 2 seeds); 2 steps of 2 prompts.
QUICK: dict[str, Any] = dict(ladder_prompts=4, ladder_candidates=1500, ladder_k=8)
QUICK.update(bins=("[-2,-3)",), near=("[-2,-3)",), main_arms=("astarpo",))
QUICK.update(side_arms=("grpo", DROP_ARM, "ppo", "rebel"), mixed_arms=("astarpo",))
QUICK.update(seeds_main=2, seeds_side=1, steps=2, eval_steps=2, batch_size=2)
QUICK.update(train_eval_rows=4, n_samples=4, group_size=2)


def presets(given: Mapping[str, Any], quick: bool) -> dict[str, Any]:
    """The scratchpad task (:data:`SCRATCHPAD`), and :data:`QUICK` with ``--quick``."""
    return {**SCRATCHPAD, **(QUICK if quick else {})}
