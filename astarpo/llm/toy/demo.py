"""The CPU demo, end to end: SFT reference -> Stage 1 -> A*-PO -> held-out evaluation -> report.

Everything is embedded (no download): the character tokenizer and tiny Qwen2-style model of
:mod:`astarpo.llm.models.toy`, and a task of :data:`~astarpo.llm.toy.tasks.TASKS`: 2-digit
addition (``addition``, the default) or worked 4-digit addition (``scratchpad``, responses of
70 tokens; ``scratchpad2``, 38 tokens). Steps:

1. SFT the randomly initialized model into a reference that solves some problems
   (:func:`astarpo.llm.toy.sft.cached_sft`; cached after the first run). On the scratchpad
   tasks SFT stops when the reference's expected accuracy on 200 check problems reaches 0.35
   (the benchmark's rule), so that there is something left to learn.
2. Stage 1: ``N = 8`` reference samples per training prompt, ``V* = beta1 log mean exp(r/beta1)``
   (:func:`astarpo.llm.stage1.estimate.estimate_values`, ``beta1 = 0.5``).
3. Stage 2: :class:`~astarpo.llm.training.trainer.AStarPOTrainer`, one sample per prompt.
4. Held-out accuracy (sampled pass@1 at temperature 1, and greedy) before training, every few
   steps, and at the end, against training wall time (evaluation time excluded).
5. ``report.json``, ``accuracy_vs_time.png`` and ``report.md`` in the output directory.

The demo regenerates only what it wrote itself
(:func:`~astarpo.llm.toy.demo_output.claim_output`): before any work it writes
:data:`~astarpo.llm.toy.demo_output.MARKER` into its output directory, and a later run may
replace the demo's files there (``train/``'s run included) only when that marker is present and
the directory holds nothing else. A directory holding other files, or a run in ``train/``
without the marker (a user's training run), is refused before the SFT unless
``overwrite=True`` (``astarpo demo --overwrite``), which writes the demo's files there and never
deletes the others.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from astarpo.llm.algorithms.astarpo import AStarPOConfig
from astarpo.llm.data.files import standard_json
from astarpo.llm.eval import evaluate
from astarpo.llm.models.toy import make_char_tokenizer, make_toy_model
from astarpo.llm.rollout.base import SamplingConfig
from astarpo.llm.rollout.hf import HFGenerator
from astarpo.llm.stage1.config import Stage1Config
from astarpo.llm.stage1.estimate import estimate_values
from astarpo.llm.toy.demo_output import claim_output, top_name
from astarpo.llm.toy.sft import SFTConfig, cached_sft
from astarpo.llm.toy.tasks import get_task
from astarpo.llm.training.trainers import AStarPOTrainer

__all__ = ["HELDOUT_POOL", "REFERENCE_TARGET", "DemoConfig", "run_demo"]


#: Problems reserved for held-out evaluation (``n_test`` of them are used).
HELDOUT_POOL = 1000

#: On the scratchpad tasks, SFT stops when the reference's expected sampled accuracy on the
#: check problems reaches this (the benchmark's default ``reference_target``).
REFERENCE_TARGET = 0.35

#: Problems at the end of the held-out region that SFT's stopping check reads (with a target).
CHECK = 200


@dataclass(frozen=True)
class DemoConfig:
    """Settings of the demo (``quick`` picks smaller defaults; see :meth:`DemoConfig.make`).

    Args:
        n_train: Training prompts (Stage 1 and Stage 2 draw from these).
        n_test: Held-out problems (disjoint from every training and SFT problem), at most
            :data:`HELDOUT_POOL`.
        n_sft: SFT examples (disjoint from the held-out set).
        sft: SFT settings.
        n_samples: N, reference samples per prompt in Stage 1.
        beta1: KL strength of V*.
        train: The A*-PO config (``output_dir`` is set to ``<out>/train``).
        eval_steps: Steps between held-out evaluations.
        eval_samples: Sampled responses per held-out problem (sampled pass@1 averages them).
        seed: Seed of the problems, Stage 1 and the evaluation.
        model: ``Qwen2Config`` overrides of the toy model (the task's shape).
        task: The embedded task (:data:`~astarpo.llm.toy.tasks.TASKS`): its problems, reward
            and model shape. Default ``"addition"``.
    """

    n_train: int
    n_test: int
    n_sft: int
    sft: SFTConfig
    train: AStarPOConfig
    n_samples: int = 8
    beta1: float = 0.5
    eval_steps: int = 10
    eval_samples: int = 2
    seed: int = 0
    model: dict[str, Any] = field(default_factory=dict)
    task: str = "addition"

    def __post_init__(self) -> None:
        get_task(self.task)  # refuses an unknown task, listing the known ones
        if self.sft.target_accuracy is not None and self.n_test > HELDOUT_POOL - CHECK:
            raise ValueError(
                f"n_test must be <= {HELDOUT_POOL - CHECK} when SFT stops at a target (the last "
                f"{CHECK} held-out problems are its check), got {self.n_test}."
            )
        if not 1 <= self.n_test <= HELDOUT_POOL:
            raise ValueError(f"n_test must be in [1, {HELDOUT_POOL}], got {self.n_test}.")
        if not 1 <= self.n_train <= self.n_sft:
            raise ValueError(f"n_train must be in [1, n_sft={self.n_sft}], got {self.n_train}.")

    @classmethod
    def make(
        cls, quick: bool = False, out_dir: str = "runs/demo", seed: int = 0, task: str = "addition"
    ) -> DemoConfig:
        """The quick (about 3 minutes on 2 cores) or full demo settings on ``task``."""
        spec = get_task(task)
        long = spec.response_tokens is not None  # the scratchpad tasks
        train = AStarPOConfig(
            output_dir=str(Path(out_dir) / "train"),  # run_demo replaces it once claimed
            seed=seed,
            max_steps=60 if quick else 400,
            batch_size=32 if long else 64,
            learning_rate=1e-4,
            beta2=1e-3,
            max_new_tokens=spec.max_new_tokens,
            save_steps=0,
            report_to="tensorboard",
        )
        return cls(
            n_train=512 if quick else 2048,
            n_test=400 if quick else (HELDOUT_POOL - CHECK if long else HELDOUT_POOL),
            n_sft=8000,
            sft=SFTConfig(
                steps=2000 if long else 1000,
                batch_size=64,
                learning_rate=spec.sft_lr,
                target_accuracy=REFERENCE_TARGET if long else None,
            ),
            train=train,
            eval_steps=20 if quick else 50,
            eval_samples=2 if quick else 4,
            seed=seed,
            model=dict(spec.model),
            task=task,
        )


def _heldout_eval(model: Any, tokenizer: Any, rows: list[dict[str, Any]], cfg: DemoConfig) -> Any:
    gen = HFGenerator(model, tokenizer, batch_size=512)
    budget, reward = cfg.train.max_new_tokens, get_task(cfg.task).reward
    sampled = evaluate(gen, rows, [reward], k=cfg.eval_samples,
                       sampling=SamplingConfig(budget, 1.0, 1.0), seed=cfg.seed + 1,
                       batch_size=256, progress=False)  # fmt: skip
    greedy = evaluate(gen, rows, [reward], k=1,
                      sampling=SamplingConfig(budget, 0.0, 1.0), batch_size=512,
                      progress=False)  # fmt: skip
    return {"sampled_pass@1": sampled["accuracy"], "greedy_pass@1": greedy["accuracy"]}


def run_demo(
    out_dir: str | Path,
    quick: bool = False,
    cache_dir: str | Path | None = None,
    seed: int = 0,
    progress: bool = True,
    config: DemoConfig | None = None,
    threads: int = 1,
    task: str = "addition",
    overwrite: bool = False,
) -> dict[str, Any]:
    """Run the demo and write the report; returns the report dict (also ``report.json``).

    Args:
        out_dir: Output directory (``report.*``, ``v_star.jsonl``, ``train/``; see
            :func:`~astarpo.llm.toy.demo_output.claim_output`).
        quick: Smaller settings (the test and CI use them).
        cache_dir: Where the SFT reference is cached (default ``$ASTARPO_CACHE`` or
            ``~/.cache/astarpo``).
        seed: Seed of everything.
        progress: Show progress bars.
        config: Explicit settings (overrides ``quick``, ``seed`` and ``task``).
        threads: torch intra-op threads during the demo (restored after). Default 1: the tiny
            model runs fastest single-threaded (measured on a shared 2-core machine: 0.075 s
            per SFT step with 1 thread, 0.085 to 0.46 s with 2, depending on other jobs).
        task: The embedded task (:data:`~astarpo.llm.toy.tasks.TASKS`). Default
            ``"addition"``.
        overwrite: Write into an ``out_dir`` the demo did not write
            (:func:`~astarpo.llm.toy.demo_output.claim_output`).

    Raises:
        FileExistsError: ``out_dir`` holds what the demo did not write (without
            ``overwrite``), before any work.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        cfg = config or DemoConfig.make(quick, str(out_dir), seed, task=task)
        claim_output(out_dir, overwrite, keep=top_name(out_dir, cache_dir))
        train_dir = Path(cfg.train.output_dir).resolve()
        if train_dir == (Path(out_dir) / "train").resolve():  # claimed: the demo's to replace
            cfg = replace(cfg, train=replace(cfg.train, overwrite_output_dir=True))
        return _run_demo(out_dir, quick and config is None, cache_dir, progress, cfg)
    finally:
        torch.set_num_threads(previous)


def _splits(cfg: DemoConfig) -> tuple[list[dict[str, str]], list[dict[str, str]], Any]:
    """``(test, sft, check)`` problems of the task. The first :data:`HELDOUT_POOL` problems
    are reserved for evaluation whatever ``n_test`` is, so the quick and full demos share the
    SFT data (and its cache); with an SFT target, its check is the last :data:`CHECK` of them,
    never in the test set (None without a target)."""
    problems = get_task(cfg.task).rows(HELDOUT_POOL + cfg.n_sft, cfg.seed)
    check = problems[HELDOUT_POOL - CHECK : HELDOUT_POOL] if cfg.sft.target_accuracy else None
    return problems[: cfg.n_test], problems[HELDOUT_POOL:], check


def _run_demo(
    out_dir: str | Path,
    quick: bool,
    cache_dir: str | Path | None,
    progress: bool,
    cfg: DemoConfig,
) -> dict[str, Any]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    tokenizer = make_char_tokenizer()
    task = get_task(cfg.task)
    test, sft_rows, check = _splits(cfg)
    train_rows = sft_rows[: cfg.n_train]

    # 1. SFT reference (cached).
    model, sft_info = cached_sft(make_toy_model(tokenizer, seed=cfg.seed, **cfg.model),
                                 tokenizer, sft_rows, cfg.sft, cache_dir, progress,
                                 check_rows=check)  # fmt: skip
    ref = model
    policy = copy.deepcopy(ref)

    # 2. Stage 1 on the training prompts.
    t0 = time.perf_counter()
    table = estimate_values(
        HFGenerator(ref, tokenizer, batch_size=512),
        train_rows,
        [task.reward],
        Stage1Config(
            n_samples=cfg.n_samples,
            beta1=cfg.beta1,
            max_new_tokens=cfg.train.max_new_tokens,
            seed=cfg.seed,
            prompts_per_call=64,
            progress=progress,
        ),
        out_path=out / "v_star.jsonl",
    )
    stage1_seconds = time.perf_counter() - t0
    v_star = table.v_star([r["prompt"] for r in train_rows])

    # 3. Stage 2 with held-out evaluations.
    trainer = AStarPOTrainer(
        policy,
        ref,
        [task.reward],
        args=cfg.train.replace(progress=progress, eval_steps=cfg.eval_steps),
        train_dataset=train_rows,
        v_star_table=table,
        tokenizer=tokenizer,
        eval_fn=lambda m: _heldout_eval(m, tokenizer, test, cfg),
    )
    history = trainer.train()
    curve = [
        {
            "step": r["step"],
            "train_seconds": r["time/train_total"],
            "sampled_pass@1": r["eval/sampled_pass@1"],
            "greedy_pass@1": r["eval/greedy_pass@1"],
        }
        for r in history
        if "eval/sampled_pass@1" in r
    ]
    steps = [r for r in history if "loss" in r]
    report = {
        "command": "astarpo demo"
        + (f" --task {cfg.task}" if cfg.task != "addition" else "")
        + (" --quick" if quick else ""),
        "config": json.loads(json.dumps(asdict(cfg), default=str)),
        "sft": sft_info,
        "stage1": {"seconds": stage1_seconds, "v_star_mean": float(v_star.mean()),
                   "pass_rate_mean": float(sum(r.pass_rate for r in table) / len(table))},
        "reference": curve[0],
        "final": curve[-1],
        "curve": curve,
        "train": {"seconds": steps[-1]["time/train_total"], "steps": len(steps),
                  "final_reward_mean": steps[-1]["reward/mean"],
                  "mean_kl_last": steps[-1]["kl"]},
        "total_seconds": time.perf_counter() - t_start,
    }  # fmt: skip
    (out / "report.json").write_text(json.dumps(standard_json(report), indent=2, allow_nan=False))
    _plot(curve, out / "accuracy_vs_time.png", cfg.task)
    (out / "report.md").write_text(_markdown(report))
    return report


def _plot(curve: list[dict[str, Any]], path: Path, task: str) -> None:
    import matplotlib  # the theory/llm extra; only when a figure is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.8), layout="constrained")
    t = [c["train_seconds"] for c in curve]
    ax.plot(t, [c["sampled_pass@1"] for c in curve], "o-", label="sampled pass@1 (T=1)")
    ax.plot(t, [c["greedy_pass@1"] for c in curve], "s--", label="greedy pass@1")
    ax.set_xlabel("A*-PO training wall time (s)")
    ax.set_ylabel("held-out accuracy")
    ax.set_title(f"Toy task {task}: A*-PO from the SFT reference")
    ax.grid(alpha=0.3)
    fig.legend(loc="outside lower center", ncol=2)  # outside the data
    fig.savefig(path, dpi=150)
    plt.close(fig)


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# A*-PO CPU demo (`{report['command']}`)",
        "",
        "| step | train time (s) | sampled pass@1 | greedy pass@1 |",
        "|---:|---:|---:|---:|",
    ]
    for c in report["curve"]:
        lines.append(
            f"| {c['step']} | {c['train_seconds']:.1f} | {c['sampled_pass@1']:.3f} "
            f"| {c['greedy_pass@1']:.3f} |"
        )
    s1 = report["stage1"]
    lines += [
        "",
        f"SFT reference: {report['sft']['seconds']:.0f} s "
        f"({'cached' if report['sft']['cached'] else 'trained now'}). "
        f"Stage 1: {s1['seconds']:.1f} s, mean V* {s1['v_star_mean']:.3f}, mean reference pass "
        f"rate {s1['pass_rate_mean']:.3f}. Total wall time {report['total_seconds']:.0f} s.",
        "",
    ]
    return "\n".join(lines)
