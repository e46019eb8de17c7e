"""The mechanism curve: A*-PO's step time over GRPO's (and PPO's, REBEL's) against response length.

Run from the repository root::

    python benchmarks/length_sweep.py --out docs/figures/length_sweep [--lengths 4,22,38,54,70]
        [--steps 6] [--bench docs/figures/bench_cpu.json --bench docs/figures/bench_scratchpad.json]

Every algorithm gets the bench's protocol
(:func:`astarpo.studies.harness.protocol.algorithm_config`:
32 prompts per step, GRPO's G = 8, the paper's beta2) and the scratchpad task's model shape,
untrained, with EOS masked out of the logits so that every response is exactly ``L`` tokens
(the lengths default to the addition answer's 4 tokens and the scratchpad's worked solutions
for 1 to 4 digits, 22 to 70). The algorithms' steps alternate (A*-PO, GRPO, PPO, REBEL, then
again), so a load change on a shared machine hits all of them; the step-time ratios are paired
by round (:func:`astarpo.analysis.stats.paired_ratio`: geometric mean, 95% t-interval). Beside
them, the cost model's prediction from GRPO's measured unit costs
(:mod:`astarpo.studies.efficiency.mechanism`) and, with ``--bench``, the time-to-target ratios that
complete bench runs measured at their task's response length (read from their ``bench.json``).

Writes ``OUT.json`` and ``OUT.png``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from astarpo.analysis.stats import paired_ratio
from astarpo.llm.models.toy import make_char_tokenizer, make_toy_model
from astarpo.llm.toy.problems import scratchpad_task
from astarpo.llm.toy.tasks import get_task
from astarpo.llm.training.trainer import Trainer
from astarpo.studies.harness.protocol import Protocol, algorithm_config

ALGOS = ("astarpo", "grpo", "ppo", "rebel")
PHASES = ("generate", "reward", "ref_logprobs", "update")


def _no_eos(model: Any, eos: int) -> None:
    """Mask ``eos`` out of the logits: every response runs to ``max_new_tokens``."""

    def hook(module: Any, inputs: Any, output: torch.Tensor) -> torch.Tensor:
        mask = torch.zeros(output.shape[-1], dtype=torch.bool, device=output.device)
        mask[eos] = True
        return output.masked_fill(mask, float("-inf"))

    model.lm_head.register_forward_hook(hook)


def _zero(prompts: list[str], completions: list[str], **kw: Any) -> list[float]:
    """Reward 0 for every response (the step's cost does not depend on it)."""
    return [0.0] * len(completions)


def measure(length: int, steps: int, warmup: int, batch: int, seed: int = 0) -> dict[str, Any]:
    """Alternating steps of every algorithm at response length ``length``."""
    tok = make_char_tokenizer()
    shape = get_task("scratchpad").model
    base = make_toy_model(tok, seed=seed, **shape).eval()
    _no_eos(base, int(tok.eos_token_id))
    rows = scratchpad_task(batch * 4, seed=seed, digits=4)
    cfg = Protocol(task="scratchpad", max_new_tokens=max(length, 78), batch_size=batch)
    trainers = {}
    for algo in ALGOS:
        out = Path(tempfile.mkdtemp(prefix=f"ls-{algo}-"))
        args = algorithm_config(algo, cfg, seed, out, 1e-5, 1e9).replace(  # type: ignore[attr-defined]
            max_new_tokens=length, eval_every_seconds=0.0
        )
        policy = copy.deepcopy(base).train().requires_grad_(True)  # the hook comes along
        v = {r["prompt"]: 0.5 for r in rows} if algo == "astarpo" else None
        trainers[algo] = Trainer(
            policy, base, [_zero], args=args, train_dataset=rows, v_star_table=v, tokenizer=tok
        )
    times: dict[str, list[float]] = {a: [] for a in ALGOS}
    phases: dict[str, dict[str, list[float]]] = {a: {k: [] for k in PHASES} for a in ALGOS}
    lengths: dict[str, list[float]] = {a: [] for a in ALGOS}
    samples: dict[str, int] = {}
    for i in range(warmup + steps):
        for algo, tr in trainers.items():
            t0 = time.perf_counter()
            rec = tr.step()
            dt = time.perf_counter() - t0
            samples[algo] = tr.algorithm.samples_per_prompt
            if i >= warmup:
                times[algo].append(dt)
                lengths[algo].append(float(rec["response_length/mean"]))
                for k in PHASES:
                    phases[algo][k].append(float(rec.get(f"time/{k}", 0.0)))
    g = trainers["grpo"].algorithm.samples_per_prompt
    unit = {k: statistics.fmean(phases["grpo"][k]) / (batch * g) for k in PHASES}
    r = statistics.fmean(phases["astarpo"]["ref_logprobs"]) / batch
    grpo_seq = unit["generate"] + unit["ref_logprobs"] + unit["update"] + unit["reward"]
    predicted = (unit["generate"] + r + unit["update"] + unit["reward"]) / (g * grpo_seq)
    return {
        "length": length,
        "response_tokens": {a: statistics.fmean(v) for a, v in lengths.items()},
        "step_s": {a: statistics.fmean(v) for a, v in times.items()},
        "phases_s": {a: {k: statistics.fmean(v) for k, v in p.items()} for a, p in phases.items()},
        "generate_share": {
            a: statistics.fmean(p["generate"]) / sum(statistics.fmean(x) for x in p.values())
            for a, p in phases.items()
        },
        "samples_per_prompt": samples,
        "ratio": {a: paired_ratio(times["astarpo"], times[a]) for a in ALGOS if a != "astarpo"},
        "predicted_ratio_grpo": predicted,
    }


def bench_points(paths: list[str]) -> list[dict[str, Any]]:
    """Time-to-target ratios (A*-PO over GRPO, PPO and REBEL, 50% target) of complete bench
    runs, at their task's reference response length (``vs``: the other algorithm)."""
    points = []
    for p in paths:
        res = json.loads(Path(p).read_text())
        s = res["summary"]
        length = res["reference"].get("response_tokens_p50")
        if length is None:  # a bench from before the length was recorded: the addition answer
            length = 4.0
        for algo in ALGOS[1:]:
            r = s["ratios"].get(algo, {}).get("50%")
            if r and r.get("pairs"):
                points.append({"bench": p, "length": length, "target": "50%", "vs": algo, **r})
    return points


def plot(result: dict[str, Any], path: Path) -> None:
    """Step-time ratio against response length, with intervals, and the bench points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from astarpo.analysis.figures import errorbars

    plt.rcParams.update({"font.size": 10, "legend.fontsize": 10})
    fig, ax = plt.subplots(figsize=(7.6, 4.6))
    pts = result["points"]
    xs = [p["length"] for p in pts]
    styles = {"grpo": ("o", "C0"), "ppo": ("s", "C1"), "rebel": ("^", "C2")}
    shift = {"grpo": -1.2, "ppo": 0.0, "rebel": 1.2}  # stars side by side at one length
    for algo, (marker, color) in styles.items():
        ys = [p["ratio"][algo]["ratio"] for p in pts]
        lo = [p["ratio"][algo]["low"] for p in pts]
        hi = [p["ratio"][algo]["high"] for p in pts]
        errorbars(ax, xs, ys, lo, hi, fmt="-", marker=marker, color=color,
                  label=f"step, vs {algo}")  # fmt: skip
    ax.plot(xs, [p["predicted_ratio_grpo"] for p in pts], "k--", label="cost model, vs grpo")
    for algo, (_, color) in styles.items():
        bs = [b for b in result["bench"] if b.get("vs", "grpo") == algo]
        for b in bs:
            errorbars(
                ax, [b["length"] + shift[algo]], [b["ratio"]], [b["low"]], [b["high"]],
                fmt="*", ms=13, color=color, mec="black",
            )  # fmt: skip
        if bs:
            ax.plot([], [], "*", color=color, mec="black", ms=13,
                    label=f"time to 50% target, vs {algo}")  # fmt: skip
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xlabel("response length (tokens)")
    ax.set_ylabel("A*-PO / other (< 1: A*-PO faster)")
    ax.set_title("A*-PO over each algorithm: step time and time to target (stars)\n95% intervals")
    ax.set_yscale("log")
    ticks = [0.1, 0.2, 0.5, 1.0, 2.0, 5.0]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.16), ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=160, bbox_inches="tight")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run the sweep, write ``OUT.json`` and ``OUT.png``; returns the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/length_sweep")
    ap.add_argument("--lengths", default="4,22,38,54,70")
    ap.add_argument("--steps", type=int, default=6, help="timed rounds per length")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bench", action="append", default=[], help="a bench.json to add")
    ap.add_argument(
        "--replot",
        action="store_true",
        help="keep OUT.json's measured points; redo the bench points and the figure only",
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.replot:
        result = json.loads(out.with_suffix(".json").read_text())
        result["bench"] = bench_points(args.bench)
        result["replot_command"] = "python benchmarks/length_sweep.py " + " ".join(
            argv if argv is not None else sys.argv[1:]
        )
        out.with_suffix(".json").write_text(json.dumps(result, indent=1))
        plot(result, out.with_suffix(".png"))
        return 0
    torch.set_num_threads(args.threads)
    t0, load0 = time.perf_counter(), os.getloadavg()
    points = []
    for length in (int(x) for x in args.lengths.split(",")):
        p = measure(length, args.steps, args.warmup, args.batch_size)
        points.append(p)
        ratios = ", ".join(f"{a} {r['ratio']:.3f}" for a, r in p["ratio"].items())
        print(f"L={length}: step ratio A*-PO/ {ratios}; cost model vs grpo "
              f"{p['predicted_ratio_grpo']:.3f}; GRPO generation share "
              f"{p['generate_share']['grpo']:.2f}", flush=True)  # fmt: skip
    result = {
        "command": "python benchmarks/length_sweep.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "points": points,
        "bench": bench_points(args.bench),
        "wall_s": time.perf_counter() - t0,
        "load": {"start": list(load0), "end": list(os.getloadavg())},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    plot(result, out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
