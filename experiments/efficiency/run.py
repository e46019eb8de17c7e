"""The efficiency study's protocol (:func:`run`), in one invocation:

1. the reference: the task's toy model fine-tuned briefly (cached) to start weak, on fixed
   splits (pool, held-out, validation) seen in the same order for a seed;
2. the hard subset: the held-out problems the reference never solves in N samples;
3. Stage 1 once on the pool (its time alone; the table the sweep reuses);
4. the learning-rate sweep (``lr_grid``) on a separate seed and the validation split, each run
   scored by :func:`~astarpo.analysis.curves.curve_area`; with ``batch_grid``, then the sweep
   of prompts per step at each run's chosen rate (:func:`sweep_batches`);
5. every seed and run (:func:`~experiments.efficiency.config.arms`) in a fresh process on
   the same wall-clock budget, A*-PO's Stage 1 (and TRL A2PO's) inside it;
6. with ``one_pass``, A*-PO and GRPO again on a pool no run goes through twice, A*-PO's Stage 1
   streamed (:mod:`~experiments.efficiency.one_pass`), after the main runs' report is
   written;
7. the report: ``bench.json``, ``bench.md``, ``bench.png``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import product
from pathlib import Path
from typing import Any

import torch

from astarpo.analysis import curve_area
from astarpo.llm import make_char_tokenizer
from experiments.efficiency import report
from experiments.efficiency.config import EfficiencyConfig, arms, peer_arms
from experiments.efficiency.one_pass import ONE_PASS_ARMS, one_pass_pool_size
from experiments.efficiency.paper import summarize_all
from experiments.efficiency.peers import check_peers, peer_info
from experiments.efficiency.summary import curve, summarize
from experiments.efficiency.worker import run_one
from experiments.harness.measure import evaluate_policy, timed_stage1
from experiments.harness.output import open_output
from experiments.harness.protocol import (
    DROP_ARM,
    SFT,
    STAGE1_ARMS,
    check_backend,
    make_reference,
    splits,
)
from experiments.harness.runner import Runner, entry, rotated
from experiments.harness.sweep import sweep_all

__all__ = ["OUTPUTS", "run", "seed_runs", "sweep_batches", "sweep_rates", "sweep_scores"]

#: What the study writes besides ``runs/`` and ``bench.json/md/png``.
OUTPUTS = ("reference", "held_out_pass.jsonl", "values.jsonl")


def _describe(res: dict[str, Any]) -> str:
    last, streamed = res["evals"][-1], res.get("stage1_streamed")
    stage1 = f"{streamed['seconds']:.1f} s streamed" if streamed else f"{res['stage1_s']:.1f} s"
    return (
        f"lr {res['lr']:g}, {res['steps']} steps, clock {res['clock_s']:.1f} s (Stage 1 "
        f"{stage1}), expected acc {last['expected_accuracy']:.3f}, greedy "
        f"{last['accuracy']:.3f}, kl {last['kl']:.3f}"
    )


def with_batch(spec: dict[str, Any], batch: int | None) -> dict[str, Any]:
    """``spec`` with its config's ``batch_size`` set to ``batch`` (``None``: unchanged)."""
    return spec if batch is None else {**spec, "config": {**spec["config"], "batch_size": batch}}


def sweep_scores(
    runner: Runner,
    cfg: EfficiencyConfig,
    base: dict[str, Any],
    points: Sequence[tuple[str, float, int | None]],
) -> list[float]:
    """Per ``(arm, lr, batch)`` point (``batch`` prompts per step; ``None``: ``batch_size``),
    the :func:`~astarpo.analysis.curves.curve_area` of the validation expected accuracy (Stage
    1 reused, on the validation rows of ``base``), the mean over ``sweep_seeds`` runs: over
    ``sweep_seconds`` of the run clock, or, on the paper protocol, over its ``steps`` (runs as
    long as the measured ones). The runs of every point go ``sweep_workers`` at a time; on the
    paper protocol a slow one is not run again (``rerun_slow``): its score reads steps, not the
    clock."""
    paper = cfg.protocol == "paper"
    clock, horizon = ("step", cfg.train.max_steps) if paper else ("time", cfg.sweep_seconds)
    seeds = range(cfg.sweep_seed, cfg.sweep_seed + cfg.sweep_seeds)
    runs = []
    for (arm, lr, batch), seed in product(points, seeds):
        spec = {**base, "arm": arm, "seed": seed, "lr": lr, "seconds": cfg.sweep_seconds}
        spec.update(steps=cfg.train.max_steps, stage1_inside=False, hard=None)
        seeded = f"-seed{seed}" if cfg.sweep_seeds > 1 else ""
        sized = "" if batch is None else f"-b{batch}"
        runs.append((f"sweep-{arm}-lr{lr:g}{sized}{seeded}", with_batch(spec, batch)))
    got = [
        curve_area(*curve(ev, "expected_accuracy", clock), horizon)
        for ev in runner.run_all(runs, cfg.sweep_workers, False if clock == "step" else None)
    ]
    return [sum(got[k : k + len(seeds)]) / len(seeds) for k in range(0, len(got), len(seeds))]


def sweep_rates(runner: Runner, cfg: EfficiencyConfig, base: dict[str, Any]) -> dict[str, Any]:
    """The sweep (:func:`~experiments.harness.sweep.sweep_all`) of every algorithm and
    peer, ``astarpo_drop`` and (with ``adaptive_n``) the Stage 1 runs at A*-PO's rate:
    ``{name: {"scores", "chosen", "extended"}}`` (and ``"given": True`` for a rate of
    ``learning_rates``, not swept)."""
    given = {
        arm: {"scores": {}, "chosen": lr, "extended": [], "given": True}
        for arm, lr in cfg.learning_rates.items()
    }
    todo = [arm for arm in (*cfg.algos, *peer_arms(cfg)) if arm not in given]

    def score_all(points: list[tuple[str, float]]) -> list[float]:
        return sweep_scores(runner, cfg, base, [(arm, lr, None) for arm, lr in points])

    lrs = {**given, **sweep_all(score_all, todo, cfg.lr_grid, cfg.grid_extensions, say=runner.say)}
    reused = (DROP_ARM, *(STAGE1_ARMS if cfg.adaptive_n else ()))
    return {**lrs, **{arm: lrs["astarpo"] for arm in reused}}


def sweep_batches(
    runner: Runner, cfg: EfficiencyConfig, base: dict[str, Any], lrs: dict[str, Any]
) -> dict[str, Any]:
    """With ``batch_grid``, the sweep of prompts per step of every algorithm and peer at its
    chosen rate (``lrs``), scored as the rates are (:func:`sweep_scores`; at ``batch_size``
    the rate sweep's own score, its runs being the same), a choice on an edge extended
    (integers): ``{name: {"scores", "chosen", "extended"}}`` (``"given": True`` for a size of
    ``batch_sizes``, not swept), the runs that reuse A*-PO's rate reusing its choice too;
    ``{}`` without a grid or given sizes."""
    given = {
        arm: {"scores": {}, "chosen": b, "extended": [], "given": True}
        for arm, b in cfg.batch_sizes.items()
    }
    todo = [arm for arm in (*cfg.algos, *peer_arms(cfg)) if arm not in given]
    if not cfg.batch_grid and not given:
        return {}

    def score_all(points: list[tuple[str, float]]) -> list[float]:
        out, new = {}, []
        for arm, b in points:
            own = lrs[arm].get("scores", {}).get(f"{lrs[arm]['chosen']:g}")
            if int(b) == cfg.train.batch_size and own is not None:
                out[(arm, b)] = own
            else:
                new.append((arm, b))
        at = [(arm, lrs[arm]["chosen"], int(b)) for arm, b in new]
        out.update(zip(new, sweep_scores(runner, cfg, base, at), strict=True))
        return [out[p] for p in points]

    grid = tuple(map(float, cfg.batch_grid or (cfg.train.batch_size,)))
    swept = sweep_all(score_all, todo, grid, cfg.grid_extensions, integer=True, say=runner.say)
    out = {**given, **{arm: {**w, "chosen": int(w["chosen"])} for arm, w in swept.items()}}
    return {**out, **{arm: out["astarpo"] for arm in (DROP_ARM, *STAGE1_ARMS)}}


def seed_runs(
    runner: Runner,
    cfg: EfficiencyConfig,
    base: dict[str, Any],
    names: tuple[str, ...],
    lrs: dict[str, Any],
    prefix: str = "",
    batches: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Every run of ``names`` for every seed at its chosen rate (and, with ``batches``, its
    chosen prompts per step), Stage 1 inside the budget, the order rotated per seed
    (:func:`~experiments.harness.runner.rotated`), ``workers`` at a time."""
    own = {"seconds": cfg.train.max_train_seconds, "steps": cfg.train.max_steps}
    own["stage1_inside"] = True
    batch = {arm: w["chosen"] for arm, w in (batches or {}).items()}
    return runner.run_all(
        [
            (
                f"{prefix}{arm}-seed{seed}",
                with_batch(
                    {**base, "arm": arm, "seed": seed, "lr": lrs[arm]["chosen"], **own},
                    batch.get(arm),
                ),
            )
            for seed, arm in rotated(names, cfg.seeds)
        ]
    )


def run(
    cfg: EfficiencyConfig,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    progress: bool = True,
    resume: bool = False,
) -> dict[str, Any]:
    """Run the whole study (see the module doc) and write ``bench.json/md/png``.

    Args:
        cfg: The protocol.
        out_dir: Output folder (reference, Stage 1 tables, ``runs/``, the report).
        overwrite: Delete an earlier run of the study there first
            (:meth:`~experiments.harness.output.OutputDir.clear`).
        progress: Print a line per phase and per run.
        resume: Continue an interrupted run in ``out_dir``: the reference, Stage 1 and the
            sweep's choices are made again, each run that finished with the same spec is read
            back instead of run (:class:`~experiments.harness.runner.Runner`).

    Returns:
        The content of ``bench.json``: ``{"config", "reference", "hard", "stage1", "sweep",
        "runs", "peers", "summary", "wall_s", "load", "slow_runs"}`` (and ``one_pass``).

    Raises:
        RuntimeError: a peer of ``cfg.peers`` or the backend is not installed (before any run).
    """
    check_peers(cfg.peers)
    check_backend(cfg.train.backend)
    cfg = cfg.resolved()
    output = open_output(out_dir, "bench", OUTPUTS, cfg, overwrite, resume)
    say = print if progress else (lambda *a, **k: None)
    runner = Runner(output, cfg.threads, cfg.workers, cfg.rerun_slow, say, _describe, resume)
    torch.set_num_threads(cfg.threads)
    rows = splits(cfg)
    say(f"[bench] reference (SFT to {cfg.sft.target_accuracy} on validation, cached)")
    for name in OUTPUTS:
        output.record(name)
    ref, sft_info = make_reference(cfg, output.path)
    say(f"[bench] reference: {sft_info['steps']} SFT steps, check {sft_info['check_accuracy']:.3f}")
    tok = make_char_tokenizer()
    held, _ = timed_stage1(ref, tok, rows["held_out"], cfg, output.path / OUTPUTS[1], seed=1)
    by_prompt = {r.prompt: r.pass_rate for r in held}
    hard = [by_prompt[r["prompt"]] == 0 for r in rows["held_out"]]
    ref_eval = evaluate_policy(ref, ref, tok, rows["held_out"], cfg, 7919, hard)
    say(f"[bench] reference held-out: {ref_eval}; hard subset {sum(hard)}/{len(hard)}")
    table, stage1_s = timed_stage1(ref, tok, rows["pool"], cfg, output.path / OUTPUTS[2], 0)
    all_wrong = sum(r.pass_rate == 0 for r in table)
    say(f"[bench] Stage 1 alone: {stage1_s:.1f}s, {all_wrong}/{len(table)} pool prompts all wrong")
    del ref
    base = {
        "entry": entry(run_one),
        "config": cfg.to_dict(),
        "reference": str(output.path / "reference"),
        "values": str(output.path / OUTPUTS[2]),
        "paths": ["reference", "values"],
    }
    swept = {**base, "train": rows["pool"], "eval": rows["val"]}
    lrs = sweep_rates(runner, cfg, swept)
    batches = sweep_batches(runner, cfg, swept, lrs)
    main = {**base, "train": rows["pool"], "eval": rows["held_out"], "hard": hard}
    result: dict[str, Any] = {
        "config": cfg.to_dict(),
        "reference": {**ref_eval, "sft": sft_info},
        "hard": {"held_out": sum(hard), "of": len(hard), "n_samples": cfg.stage1.n_samples},
        "stage1": {"seconds": stage1_s, "prompts": len(table), "all_wrong": all_wrong},
        "sweep": lrs,
        **({"sweep_batch": batches} if batches else {}),
        "runs": seed_runs(runner, cfg, main, arms(cfg), lrs, batches=batches),
        "peers": {p: peer_info(cfg) for p in cfg.peers},
    }
    result["summary"] = summarize_all(result)
    runner.stamp(result)
    report.write(output, result)
    if cfg.one_pass:  # the main runs' report is on disk first: a failed one-pass run loses none
        say(f"[bench] main runs written to {output.path / 'bench.json'}; now the one-pass setting")
        try:
            result["one_pass"] = _one_pass(runner, cfg, main, result)
        except RuntimeError as e:
            say(f"[bench] the one-pass setting failed; the main runs' report stands: {e}")
            result["one_pass_error"] = str(e)
        runner.stamp(result)
        report.write(output, result)
    say(f"[bench] wrote {output.path / 'bench.md'}, bench.json and bench.png")
    return result


def _one_pass(
    runner: Runner, cfg: EfficiencyConfig, main: dict[str, Any], result: dict[str, Any]
) -> dict[str, Any]:
    """A*-PO and GRPO again (same seeds and rates) on a pool no run revisits, A*-PO estimating
    V* of each prompt when first drawn, read on the main runs' targets: ``{"sizing", "config",
    "runs", "summary"}``."""
    budget, batch = cfg.train.max_train_seconds, cfg.train.batch_size
    sizing = one_pass_pool_size(result["runs"], budget, batch, limit=SFT)
    wide = replace(cfg, pool_size=sizing["pool_size"])
    runner.say(f"[bench] one pass: pool of {wide.pool_size} prompts ({sizing['need']})")
    names = tuple(a for a in ONE_PASS_ARMS if a in cfg.algos)
    spec = {**main, "config": wide.to_dict(), "train": splits(wide)["pool"], "stream_stage1": True}
    batches = result.get("sweep_batch")
    runs = seed_runs(runner, wide, spec, names, result["sweep"], "onepass-", batches)
    config = {**wide.to_dict(), "algos": names}
    summary = summarize({**result, "config": config, "runs": runs}, result["summary"]["targets"])
    return {"sizing": sizing, "config": config, "runs": runs, "summary": summary}
