"""Cost of one A*-PO ``Trainer.step()`` in two source trees, measured by the same code.

Run from the repository root::

    python benchmarks/step_cost.py --before /path/to/old/checkout --after . \\
        [--rounds 5] [--warmup 3] [--steps 15] [--threads 1] [--mixed-precision auto]

The setting is that of ``astarpo bench`` on CPU: the bench's weak reference (the toy model
after its cached SFT; ``--untrained`` for the random toy model), saved once to a temporary
directory and loaded by both sides as policy and reference, so both trees step the same
weights; 32 prompts of the zero-padded 2-digit addition task per step, ``max_new_tokens`` 5,
temperature 1, learning rate 1e-4, ``beta2`` 1e-3, V* = 0.5 for every prompt (a dict), exact
match reward, one torch thread.

Each round is a fresh child process per tree (``PYTHONPATH`` set to the tree), rounds
alternating before, after, before, after, ... so both see the same machine load; a child runs
``--warmup`` steps, then ``--steps`` timed ones. The child code imports the new module layout
and falls back to the old one (``astarpo.llm.toy``, ``astarpo.llm.rewards``, ...).

Prints, for each tree, the median over rounds of each round's median wall and CPU
(``process_time``, the steadier figure on a shared machine) milliseconds per step and the
per-phase medians; then the ratio after / before (median of the per-round ratios, with their
min..max), and the load average before and after the measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any

PHASES = ("generate", "reward", "ref_logprobs", "update")


# Where the toy model and its problems lived, newest layout first.
TOY_MODULES = (
    "astarpo.llm.models.toy",
    "astarpo.llm.toy.problems",
    "astarpo.llm.toy.model",
    "astarpo.llm.toy",
)


def _import(name: str, *modules: str) -> Any:
    """``name`` from the first of ``modules`` that has it (the current layout first, then the
    layouts before each refactor, so that a baseline checkout runs this script too)."""
    import importlib

    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise ImportError(f"none of {', '.join(modules)} has {name}")


def child_prepare(model_dir: str, untrained: bool) -> None:
    """Save the reference (SFT'd toy model, or the untrained one) to ``model_dir``."""
    toy = TOY_MODULES
    tok = _import("make_char_tokenizer", *toy)()
    model = _import("make_toy_model", *toy)(tok, seed=0)
    if not untrained:
        rows = _import("addition_task", *toy)(9000, seed=0, zero_pad=True)[1000:]
        sft_cfg = _import("SFTConfig", "astarpo.llm.toy.sft", "astarpo.llm.sft")(500, 64, 2e-3)
        cached_sft = _import("cached_sft", "astarpo.llm.toy.sft", "astarpo.llm.sft")
        model, _ = cached_sft(model, tok, rows, sft_cfg, progress=False)
    model.save_pretrained(model_dir)


def child_run(args: argparse.Namespace) -> None:
    """Time ``args.warmup + args.steps`` steps; print one JSON line of per-step figures."""
    import dataclasses
    import time

    import torch
    from transformers import AutoModelForCausalLM

    from astarpo.llm import AStarPOConfig, AStarPOTrainer

    torch.set_num_threads(args.threads)
    toy = TOY_MODULES
    tok = _import("make_char_tokenizer", *toy)()
    rows = _import("addition_task", *toy)(10000, seed=1, zero_pad=True)[: args.batch_size]
    reward = _import(
        "exact_match_reward",
        "astarpo.llm.rewards.builtin",
        "astarpo.llm.data.rewards",
        "astarpo.llm.rewards",
    )
    policy = AutoModelForCausalLM.from_pretrained(args.child_run).train()
    ref = AutoModelForCausalLM.from_pretrained(args.child_run).eval()
    fields = {f.name for f in dataclasses.fields(AStarPOConfig)}
    backend = {"backend": "hf"} if "backend" in fields else {"generation_backend": "hf"}
    quiet = {"report_to": "none"} if "report_to" in fields else {"tensorboard": False}
    cfg = AStarPOConfig(
        output_dir=tempfile.mkdtemp(), batch_size=args.batch_size, learning_rate=1e-4,
        beta2=1e-3, max_new_tokens=5, temperature=1.0, generation_batch_size=256,
        save_steps=0, device="cpu", progress=False,
        mixed_precision=args.mixed_precision, **backend, **quiet,
    )  # fmt: skip
    trainer = AStarPOTrainer(
        policy, ref, [reward], args=cfg, train_dataset=rows,
        v_star_table={r["prompt"]: 0.5 for r in rows}, tokenizer=tok,
    )  # fmt: skip
    out: dict[str, list[float]] = {"wall": [], "cpu": [], **{k: [] for k in PHASES}}
    for i in range(args.warmup + args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        rec = trainer.step()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if i >= args.warmup:
            out["wall"].append(wall)
            out["cpu"].append(cpu)
            for k in PHASES:
                out[k].append(float(rec.get(f"time/{k}", float("nan"))))
    print(json.dumps(out))


def run_round(tree: str, model_dir: str, args: argparse.Namespace) -> dict[str, float]:
    """One child process on ``tree``; the medians of its timed steps."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), OMP_NUM_THREADS=str(args.threads))
    cmd = [sys.executable, os.path.abspath(__file__), "--child-run", model_dir]
    cmd += ["--warmup", str(args.warmup), "--steps", str(args.steps)]
    cmd += ["--threads", str(args.threads), "--batch-size", str(args.batch_size)]
    cmd += ["--mixed-precision", args.mixed_precision]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"child on {tree} failed:\n{proc.stderr[-4000:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return {k: statistics.median(v) for k, v in data.items()}


def _loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the rounds (or be a child) and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=None, help="source tree of the baseline")
    ap.add_argument("--after", default=".", help="source tree measured against it")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per tree (>= 3)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps per round")
    ap.add_argument("--steps", type=int, default=15, help="timed steps per round")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--mixed-precision", default="auto", help="both trees' setting")
    ap.add_argument("--untrained", action="store_true", help="the random toy model instead")
    ap.add_argument("--child-run", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-prepare", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_prepare:
        child_prepare(args.child_prepare, args.untrained)
        return 0
    if args.child_run:
        child_run(args)
        return 0
    if args.before is None:
        ap.error("--before is required")
    trees = {"before": args.before, "after": args.after}
    load0 = _loadavg()
    with tempfile.TemporaryDirectory() as model_dir:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(args.after))
        cmd = [sys.executable, os.path.abspath(__file__), "--child-prepare", model_dir]
        cmd += ["--untrained"] if args.untrained else []
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        res: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
        for r in range(args.rounds):
            for name, tree in trees.items():
                res[name].append(run_round(tree, model_dir, args))
                got = res[name][-1]
                print(f"round {r + 1} {name:6s} {1e3 * got['wall']:7.1f} ms wall "
                      f"{1e3 * got['cpu']:7.1f} ms CPU", flush=True)  # fmt: skip
    print(f"\nA*-PO step, batch {args.batch_size}, {args.rounds} rounds x ({args.warmup} warm-up"
          f" + {args.steps} timed) steps per tree, torch threads {args.threads}, "
          f"mixed_precision={args.mixed_precision}")  # fmt: skip
    for name, tree in trees.items():
        med = {k: statistics.median(x[k] for x in res[name]) for k in res[name][0]}
        phases = ", ".join(f"{k} {1e3 * med[k]:.1f}" for k in PHASES)
        print(f"{name:6s} {1e3 * med['wall']:7.1f} ms/step wall, {1e3 * med['cpu']:7.1f} ms/step "
              f"CPU; phases (wall ms) {phases}   [{tree}]")  # fmt: skip
    for k in ("wall", "cpu"):
        ratios = [a[k] / b[k] for a, b in zip(res["after"], res["before"], strict=True)]
        print(f"ratio after / before, {k:4s}: {statistics.median(ratios):.3f} "
              f"(rounds {min(ratios):.3f} .. {max(ratios):.3f})")  # fmt: skip
    print(f"load average (1, 5, 15 min): before {load0}, after {_loadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
