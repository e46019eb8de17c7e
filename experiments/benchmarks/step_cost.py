"""The cost of one A*-PO ``Trainer.step()``: against a hand-written loop, or in two source trees.

Run from the repository root::

    python -m experiments.benchmarks.step_cost [--steps 40] [--task scratchpad --reference DIR]
    python -m experiments.benchmarks.step_cost --before /path/to/old/checkout [--after .] [--rounds
    5]

The setting is ``python -m experiments.efficiency``'s on CPU: its reference (``--untrained``: the
random toy
model; ``--reference``: a saved one) as policy and reference, 32 prompts per step, the task's
budget and reward, temperature 1, learning rate 1e-4, ``beta2`` 1e-3, V* = 0.5, one thread.
Without ``--before``, ``Trainer.step`` and the fixed loop below written from scratch alternate
in one process: the ratio library / hand-written (target <= 1.05) compares the library with
itself under any load. With ``--before``, each round is a fresh process per tree (``PYTHONPATH``
set to it; the child falls back to the layouts before each refactor), alternating before,
after, ...: ``--warmup`` steps, then ``--steps`` timed ones. Prints median wall and CPU ms per
step, the library's phases, and the ratio (geometric mean of the paired ratios per step or
round, 95% interval: :func:`astarpo.analysis.stats.paired_ratio`) with the load average.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM

from astarpo.llm import AStarPOConfig, AStarPOTrainer  # in either tree
from experiments.benchmarks.common import child_result

PHASES = ("generate", "reward", "ref_logprobs", "update")
#: Where the toy model and problems lived, the current layout first.
TOY: tuple[str, ...] = ("astarpo.llm.models.toy", "astarpo.llm.toy.problems")
TOY += ("astarpo.llm.toy.model", "astarpo.llm.toy")


def _import(name: str, *modules: str) -> Any:
    """``name`` from the first of ``modules`` that has it (so that an old checkout runs the
    child too)."""
    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise ImportError(f"none of {', '.join(modules)} has {name}")


def library_trainer(model_dir: str, args: argparse.Namespace, rows: list[dict[str, Any]]) -> Any:
    """The library's A*-PO trainer of this setting, in whatever tree is imported."""
    reward = _import("exact_match_reward", "astarpo.llm.rewards.builtin", "astarpo.llm.rewards")
    if args.task != "addition":
        reward = _import("get_task", "astarpo.llm.toy.tasks")(args.task).reward
    fields = {f.name for f in dataclasses.fields(AStarPOConfig)}
    old = {"generation_backend": "hf", "tensorboard": False}
    new = {"backend": "hf", "report_to": "none", "mixed_precision": args.mixed_precision}
    kw = dict(output_dir=tempfile.mkdtemp(), batch_size=len(rows), learning_rate=1e-4, beta2=1e-3)
    kw.update(max_new_tokens=args.max_new_tokens, temperature=1.0, generation_batch_size=256)
    kw.update({k: v for k, v in {**old, **new}.items() if k in fields})
    cfg = AStarPOConfig(**kw, save_steps=0, device="cpu", progress=False)
    policy, ref = (AutoModelForCausalLM.from_pretrained(model_dir) for _ in range(2))
    v_star = {r["prompt"]: 0.5 for r in rows}
    kw = dict(args=cfg, train_dataset=rows, v_star_table=v_star, tokenizer=_tokenizer())
    return AStarPOTrainer(policy.train(), ref.eval(), [reward], **kw)


def _tokenizer() -> Any:
    return _import("make_char_tokenizer", *TOY)()


def _rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.task == "addition":
        return _import("addition_task", *TOY)(10000, seed=1, zero_pad=True)[: args.batch_size]
    return _import("get_task", "astarpo.llm.toy.tasks")(args.task).rows(10000, 1)[: args.batch_size]


def hand_written_step(
    policy: Any, ref: Any, opt: Any, tok: Any, rows: list[dict[str, str]], args: Any, seed: int
) -> None:
    """One A*-PO step written from scratch (V* = 0.5, ``beta2`` 1e-3) in the setting ``args``."""
    prompts = [r["prompt"] for r in rows]
    enc = tok(prompts, add_special_tokens=False, padding=True, return_tensors="pt")
    width = enc["input_ids"].shape[1]
    policy.eval()
    torch.manual_seed(seed)
    sampling = dict(
        do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=args.max_new_tokens
    )
    with torch.no_grad():
        out = policy.generate(
            **enc, **sampling, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id
        )
    policy.train()
    resp = out[:, width:]
    is_eos = resp == tok.eos_token_id
    first = torch.where(is_eos.any(1), is_eos.float().argmax(1), resp.shape[1] - 1)
    mask = torch.arange(resp.shape[1]).unsqueeze(0) <= first.unsqueeze(1)
    texts = tok.batch_decode(resp.masked_fill(~mask, tok.pad_token_id), skip_special_tokens=True)
    correct = torch.tensor(
        [float(t.strip() == r["answer"]) for t, r in zip(texts, rows, strict=True)]
    )
    reward = correct * is_eos.any(1) if args.task != "addition" else correct  # scratchpad: EOS too
    attn = torch.cat([enc["attention_mask"], mask.long()], 1)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)

    def logp(model: Any) -> torch.Tensor:
        logits = model(input_ids=out, attention_mask=attn, position_ids=pos, use_cache=False).logits
        lp = torch.log_softmax(logits[:, width - 1 : -1].float(), -1)
        return (lp.gather(-1, resp.unsqueeze(-1)).squeeze(-1) * mask).sum(-1)

    with torch.no_grad():
        logp_ref = logp(ref)
    loss = ((1e-3 * (logp(policy) - logp_ref) - (reward - 0.5)) ** 2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
    opt.step()


def child(args: argparse.Namespace) -> None:
    """Time ``warmup + steps`` library steps in this tree; print one JSON line of per-step
    seconds (``wall``, ``cpu``, ``time/PHASE``). The loop is the script's, not the harness's
    ``alternate``: a tree from before the harness runs it too."""
    torch.set_num_threads(args.threads)
    trainer = library_trainer(args.child, args, _rows(args))
    out: dict[str, list[float]] = {}
    for i in range(args.warmup + args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        rec = trainer.step()
        step = {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}
        step.update({f"time/{k}": rec.get(f"time/{k}", float("nan")) for k in PHASES})
        for k, v in step.items() if i >= args.warmup else ():
            out.setdefault(k, []).append(float(v))
    print(json.dumps(out))


def reference(args: argparse.Namespace, tmp: str) -> str:
    """The folder of the setting's reference (see the module doc), saved under ``tmp``."""
    from astarpo.llm import get_task, make_char_tokenizer, make_toy_model
    from experiments.harness.protocol import Protocol, make_reference

    task = get_task(args.task)
    if args.reference:
        return str(args.reference)
    if args.untrained:
        make_toy_model(make_char_tokenizer(), seed=0, **task.model).save_pretrained(tmp)
        return tmp
    cfg = Protocol.from_dict(
        dict(task=args.task, max_new_tokens=args.max_new_tokens, sft_lr=task.sft_lr)
    )
    make_reference(cfg, Path(tmp))
    return str(Path(tmp) / "reference")


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, measure (or be a child) and print the figures."""
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=None, help="source tree of the baseline (tree mode)")
    ap.add_argument("--after", default=".", help="source tree measured against it")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per tree (tree mode, >= 2)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (40; tree mode: 15)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--mixed-precision", default="auto", help="the library's setting")
    ap.add_argument("--task", default="addition", choices=("addition", "scratchpad"))
    ap.add_argument("--reference", default=None, help="a saved reference model folder")
    ap.add_argument("--untrained", action="store_true", help="the random toy model instead")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.steps = args.steps or (15 if args.before else 40)
    args.max_new_tokens = 5 if args.task == "addition" else 78
    if args.child:
        child(args)
        return 0
    from astarpo.analysis import paired_ratio
    from experiments.harness.report import fmt_ci

    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = reference(args, tmp)
        res = _trees(args, argv, model_dir) if args.before else _side_by_side(args, model_dir)
    (a, b), target = res, "" if args.before else "; target <= 1.05 against the hand-written loop"
    print(
        f"A*-PO step, task {args.task}, batch {args.batch_size}, {args.steps} timed steps, "
        f"torch threads {args.threads}, mixed_precision={args.mixed_precision}"
    )
    for name, r in res.items():
        ms = {k: 1e3 * statistics.median(v) for k, v in r.items()}
        phases = ", ".join(f"{k} {ms[f'time/{k}']:.1f}" for k in PHASES if f"time/{k}" in ms)
        line = f"{name:12s} {ms['wall']:8.1f} ms/step wall, {ms['cpu']:8.1f} ms CPU (medians)"
        print(line + (f"; phases (ms) {phases}" if phases else ""))  # none: the hand-written
    for k in ("wall", "cpu"):
        r = paired_ratio(res[a][k], res[b][k])
        ratio = fmt_ci({**r, "mean": r["ratio"]}, 4)
        print(f"ratio {a} / {b}, {k:4s}: {ratio} (95%, {r['pairs']} pairs{target})")
    print(f"load average (1, 5, 15 min): before {load0}, after {os.getloadavg()}")
    return 0


def _side_by_side(args: argparse.Namespace, model_dir: str) -> dict[str, dict[str, list[float]]]:
    """The library step and the hand-written one, alternating, in this process."""
    from experiments.harness.measure import alternate

    torch.set_num_threads(args.threads)
    rows, lib = _rows(args), library_trainer(model_dir, args, _rows(args))
    mine = copy.deepcopy(lib.ref_model).train().requires_grad_(True)
    opt = torch.optim.AdamW(mine.parameters(), lr=1e-4, weight_decay=0.0)
    tok = _tokenizer()
    steps = {
        "library": lambda i: lib.step(),
        "hand-written": lambda i: hand_written_step(mine, lib.ref_model, opt, tok, rows, args, i),
    }
    return alternate(steps, args.steps, args.warmup)


def _trees(args: argparse.Namespace, argv: list[str], model_dir: str) -> dict[str, Any]:
    """Rounds of a child process per tree (this command's flags, ``--child``); per tree the
    medians of each round's steps."""
    trees = {"after": args.after, "before": args.before}
    res: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    cmd = [sys.executable, os.path.abspath(__file__), *argv, "--child", model_dir]
    threads = str(args.threads)
    for r in range(args.rounds):
        for name, tree in reversed(trees.items()):  # before, after, before, ...
            env = {**os.environ, "PYTHONPATH": os.path.abspath(tree), "OMP_NUM_THREADS": threads}
            data = child_result(cmd, f"the child on {tree}", env=env)
            for k, v in data.items():
                res[name].setdefault(k, []).append(statistics.median(v))
            print(
                f"round {r + 1} {name:6s} {1e3 * res[name]['wall'][-1]:7.1f} ms wall "
                f"{1e3 * res[name]['cpu'][-1]:7.1f} ms CPU   [{tree}]",
                flush=True,
            )
    return res


if __name__ == "__main__":
    raise SystemExit(main())
