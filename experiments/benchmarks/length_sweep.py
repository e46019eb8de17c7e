"""The mechanism curve: A*-PO's step time over GRPO's (and PPO's, REBEL's) against response length.

Run from the repository root::

    python -m experiments.benchmarks.length_sweep --out docs/figures/length_sweep [--lengths
    4,22,38,54,70]
        [--steps 6] [--bench docs/figures/bench_cpu.json --bench docs/figures/bench_scratchpad.json]

Each algorithm: the efficiency study's protocol, the scratchpad model's shape untrained, EOS
masked so that every response is ``L`` tokens; steps alternate (``alternate``), ratios paired by
round (``paired_ratio``); beside them the cost model's prediction from GRPO's unit costs
(``predicted_ratio``) and, with ``--bench``, studies' time-to-target ratios at their response
length. Writes ``OUT.json`` and ``OUT.png``.
"""

from __future__ import annotations

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

from astarpo.analysis import errorbars, figure, legend_below, paired_ratio, save, styled
from astarpo.llm import Trainer, get_task, make_char_tokenizer, make_toy_model, scratchpad_task
from experiments.benchmarks.common import parser
from experiments.efficiency.mechanism import predicted_ratio
from experiments.harness.measure import alternate
from experiments.harness.protocol import Protocol, algorithm_config
from experiments.harness.training import PHASES

ALGOS = ("astarpo", "grpo", "ppo", "rebel")
INTERVAL = ("ratio", "low", "high")


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
    base = make_toy_model(tok, seed=seed, **get_task("scratchpad").model).eval()
    _no_eos(base, int(tok.eos_token_id))
    rows = scratchpad_task(batch * 4, seed=seed, digits=4)
    cfg = Protocol.from_dict(
        dict(task="scratchpad", max_new_tokens=max(length, 78), batch_size=batch)
    )
    trainers = {}
    for algo in ALGOS:
        out = Path(tempfile.mkdtemp(prefix=f"ls-{algo}-"))
        args = algorithm_config(algo, cfg, seed, out, 1e-5, 1e9).replace(
            max_new_tokens=length, eval_every_seconds=0.0
        )
        policy = copy.deepcopy(base).train().requires_grad_(True)  # the hook comes along
        v = {r["prompt"]: 0.5 for r in rows} if algo == "astarpo" else None
        trainers[algo] = Trainer(
            policy, base, [_zero], args=args, train_dataset=rows, v_star_table=v, tokenizer=tok
        )
    times = alternate({a: (lambda i, t=t: t.step()) for a, t in trainers.items()}, steps, warmup)
    mean = {a: {k: statistics.fmean(v) for k, v in t.items()} for a, t in times.items()}
    g = trainers["grpo"].algorithm.samples_per_prompt
    unit = {k: mean["grpo"][f"time/{k}"] / (batch * g) for k in PHASES}
    units = {"g": unit["generate"], "r_grpo": unit["ref_logprobs"], "u": unit["update"]}
    units.update(w=unit["reward"], r=mean["astarpo"]["time/ref_logprobs"] / batch)
    phases = {a: {k: m[f"time/{k}"] for k in PHASES} for a, m in mean.items()}
    return {
        "length": length,
        "response_tokens": {a: m["response_length/mean"] for a, m in mean.items()},
        "step_s": {a: m["wall"] for a, m in mean.items()},
        "phases_s": phases,
        "generate_share": {a: p["generate"] / sum(p.values()) for a, p in phases.items()},
        "samples_per_prompt": {a: t.algorithm.samples_per_prompt for a, t in trainers.items()},
        "ratio": {a: paired_ratio(times["astarpo"]["wall"], times[a]["wall"]) for a in ALGOS[1:]},
        "predicted_ratio_grpo": predicted_ratio(units, g),
    }


def bench_points(paths: list[str]) -> list[dict[str, Any]]:
    """Time-to-target ratios (A*-PO over GRPO, PPO and REBEL, 50% target) of complete studies,
    at their task's reference response length (``vs``: the other algorithm)."""
    points = []
    for p in paths:
        res = json.loads(Path(p).read_text())
        length = res["reference"].get("response_tokens_p50") or 4.0  # older: the addition answer
        for algo in ALGOS[1:]:
            r = res["summary"]["ratios"].get(algo, {}).get("50%")
            if r and r.get("pairs"):
                points.append({"bench": p, "length": length, "target": "50%", "vs": algo, **r})
    return points


@styled
def plot(result: dict[str, Any], path: Path) -> Any:
    """Step-time ratio against response length, with intervals, and the studies' points."""
    fig, (ax,) = figure(height=4.6)
    xs = [p["length"] for p in result["points"]]
    styles = {"grpo": ("o", "C0", -1.2), "ppo": ("s", "C1", 0.0), "rebel": ("^", "C2", 1.2)}
    for algo, (marker, color, shift) in styles.items():
        r = [[x[k] for x in (p["ratio"][algo] for p in result["points"])] for k in INTERVAL]
        errorbars(
            ax, xs, r[0], r[1], r[2], fmt="-", marker=marker, color=color, label=f"step, vs {algo}"
        )
        for b in [b for b in result["bench"] if b.get("vs", "grpo") == algo]:
            point = [[b[k]] for k in INTERVAL]
            errorbars(
                ax,
                [b["length"] + shift],
                point[0],
                point[1],
                point[2],
                fmt="*",
                ms=13,
                color=color,
                mec="black",
            )
        label = f"time to 50% target, vs {algo}"
        ax.plot([], [], "*", color=color, mec="black", ms=13, label=label)
    predicted = [p["predicted_ratio_grpo"] for p in result["points"]]
    ax.plot(xs, predicted, "k--", label="cost model, vs grpo")
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set(xlabel="response length (tokens)", ylabel="A*-PO / other (< 1: A*-PO faster)")
    ax.set_yscale("log")
    ticks = [0.1, 0.2, 0.5, 1.0, 2.0, 5.0]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    legend_below(fig, *ax.get_legend_handles_labels())
    title = "A*-PO over each algorithm: step time and time to target (stars), 95% intervals"
    return save(fig, path, title, strict=True)


def main(argv: list[str] | None = None) -> int:
    """Run the sweep, write ``OUT.json`` and ``OUT.png``; returns the exit code."""
    flags = dict(
        out="runs/length_sweep", lengths="4,22,38,54,70", steps=(6, "timed rounds per length")
    )
    ap = parser(__doc__.splitlines()[0], **flags, warmup=1, batch_size=32, threads=1)
    ap.add_argument("--bench", action="append", default=[], help="a bench.json to add")
    redo = "keep OUT.json's points; redo the studies' points and the figure"
    ap.add_argument("--replot", action="store_true", help=redo)
    argv = sys.argv[1:] if argv is None else argv
    args = ap.parse_args(argv)
    out = Path(args.out).with_suffix(".json")
    command = "python -m experiments.benchmarks.length_sweep " + " ".join(argv)
    if args.replot:
        result = json.loads(out.read_text())
        result.update(bench=bench_points(args.bench), replot_command=command)
    else:
        torch.set_num_threads(args.threads)
        t0, load0, points = time.perf_counter(), os.getloadavg(), []
        for length in (int(x) for x in args.lengths.split(",")):
            points.append(p := measure(length, args.steps, args.warmup, args.batch_size))
            ratios = ", ".join(f"{a} {r['ratio']:.3f}" for a, r in p["ratio"].items())
            cost = f"cost model vs grpo {p['predicted_ratio_grpo']:.3f}"
            print(f"L={length}: step ratio A*-PO/ {ratios}; {cost}", flush=True)
        result = {"command": command, "points": points, "bench": bench_points(args.bench)}
        load = {"start": list(load0), "end": list(os.getloadavg())}
        result.update(wall_s=time.perf_counter() - t0, load=load)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    plot(result, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
