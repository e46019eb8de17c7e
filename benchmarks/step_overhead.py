"""The library's A*-PO step against a minimal hand-written loop, same model and batch.

Run from the repository root::

    python benchmarks/step_overhead.py [--steps 40] [--batch-size 32] [--threads 1]
    python benchmarks/step_overhead.py --task scratchpad --reference runs/bench/reference

Two copies of the same policy (the benchmark's weak reference, from the SFT cache, or the
untrained toy model with ``--untrained``) train side by side in one process, steps alternating
so that both see the same machine load: one through :meth:`astarpo.llm.Trainer.step` (the
whole step: generation, rewards, reference log-probs, the update), one through the loop below
written from scratch with ``model.generate``, two forward passes, the A*-PO loss, backward,
clipping and AdamW. Both use the same prompts, sampling settings, reward, V* and learning rate.
Prints the median wall and CPU seconds per step of each (CPU time, one thread, is the steadier
figure on a shared machine), the ratio library / hand-written (target <= 1.05) and the
library's per-phase medians. The hand-written loop is fixed, so the ratio measured
before and after a library change compares the library with itself under any load.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
from typing import Any

import torch
from transformers import AutoModelForCausalLM

from astarpo.llm.algorithms.astarpo import AStarPOConfig
from astarpo.llm.models.toy import make_char_tokenizer, make_toy_model
from astarpo.llm.toy.problems import addition_task
from astarpo.llm.toy.sft import SFTConfig, cached_sft
from astarpo.llm.toy.tasks import get_task
from astarpo.llm.training.trainer import Trainer


def hand_written_step(
    policy: Any, ref: Any, opt: Any, tok: Any, rows: list[dict[str, str]], v: dict[str, float],
    beta2: float, max_new: int, seed: int, need_eos: bool = False,
) -> tuple[float, float]:  # fmt: skip
    """One A*-PO step written from scratch; returns its ``(wall, CPU)`` seconds."""
    t0, c0 = time.perf_counter(), time.process_time()
    prompts = [r["prompt"] for r in rows]
    enc = tok(prompts, add_special_tokens=False, padding=True, return_tensors="pt")
    width = enc["input_ids"].shape[1]
    policy.eval()
    torch.manual_seed(seed)
    with torch.no_grad():
        out = policy.generate(
            **enc, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=max_new,
            pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
        )  # fmt: skip
    policy.train()
    resp = out[:, width:]
    is_eos = resp == tok.eos_token_id
    first = torch.where(is_eos.any(1), is_eos.float().argmax(1), resp.shape[1] - 1)
    resp_mask = torch.arange(resp.shape[1]).unsqueeze(0) <= first.unsqueeze(1)
    texts = tok.batch_decode(
        resp.masked_fill(~resp_mask, tok.pad_token_id), skip_special_tokens=True
    )
    ended = is_eos.any(1).tolist()  # the scratchpad's reward also needs EOS
    reward = torch.tensor(
        [
            float(t.strip() == r["answer"] and (e or not need_eos))
            for t, r, e in zip(texts, rows, ended, strict=True)
        ]
    )
    v_star = torch.tensor([v[p] for p in prompts])
    attn = torch.cat([enc["attention_mask"], resp_mask.long()], 1)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    targets = out[:, width:]

    def logp(model: Any) -> torch.Tensor:
        logits = model(input_ids=out, attention_mask=attn, position_ids=pos, use_cache=False).logits
        lp = torch.log_softmax(logits[:, width - 1 : -1].float(), -1)
        tok_lp = lp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return (tok_lp * resp_mask).sum(-1)

    with torch.no_grad():
        logp_ref = logp(ref)
    loss = ((beta2 * (logp(policy) - logp_ref) - (reward - v_star)) ** 2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
    opt.step()
    return time.perf_counter() - t0, time.process_time() - c0


def reference(untrained: bool, task: str = "addition", path: str | None = None) -> tuple[Any, Any]:
    """The benchmark's weak reference (``astarpo bench`` defaults), a saved model (``path``) or
    the untrained toy model of the task's shape."""
    tok = make_char_tokenizer()
    if path is not None:
        return tok, AutoModelForCausalLM.from_pretrained(path, local_files_only=True).eval()
    model = make_toy_model(tok, seed=0, **get_task(task).model)
    if not untrained and task == "addition":
        rows = addition_task(9000, seed=0, zero_pad=True)[1000:]
        model, _ = cached_sft(model, tok, rows, SFTConfig(500, 64, 2e-3), progress=False)
    return tok, model.eval()


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print the table; returns the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40, help="timed steps of each (after warm-up)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--untrained", action="store_true", help="the random toy model instead")
    ap.add_argument("--mixed-precision", default="auto", help="the library run's setting")
    ap.add_argument("--task", default="addition", choices=("addition", "scratchpad"))
    ap.add_argument("--reference", default=None, help="a saved reference model directory")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    task = get_task(args.task)
    tok, ref = reference(args.untrained, args.task, args.reference)
    rows = task.rows(10000, 1)[: args.batch_size]
    max_new = task.max_new_tokens
    v = {r["prompt"]: 0.5 for r in rows}
    cfg = AStarPOConfig(
        output_dir=tempfile.mkdtemp(), batch_size=args.batch_size, learning_rate=1e-4,
        max_new_tokens=max_new, generation_batch_size=256, save_steps=0, device="cpu",
        report_to="none", progress=False, backend="hf", mixed_precision=args.mixed_precision,
    )  # fmt: skip
    lib = Trainer(
        copy.deepcopy(ref).train(), ref, [task.reward], args=cfg, train_dataset=rows,
        v_star_table=v, tokenizer=tok,
    )  # fmt: skip
    mine = copy.deepcopy(ref).train().requires_grad_(True)
    opt = torch.optim.AdamW(mine.parameters(), lr=1e-4, weight_decay=0.0)
    wall: dict[str, list[float]] = {"library": [], "hand-written": []}
    cpu: dict[str, list[float]] = {"library": [], "hand-written": []}
    phases: dict[str, list[float]] = {}
    lengths: list[float] = []
    for i in range(args.warmup + args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        rec = lib.step()
        lib_t = (time.perf_counter() - t0, time.process_time() - c0)
        mine_t = hand_written_step(
            mine, ref, opt, tok, rows, v, cfg.beta2, max_new, i, args.task == "scratchpad"
        )
        if i >= args.warmup:
            for name, (w, c) in (("library", lib_t), ("hand-written", mine_t)):
                wall[name].append(w)
                cpu[name].append(c)
            lengths.append(rec["response_length/mean"])
            for k in ("generate", "reward", "ref_logprobs", "update"):
                phases.setdefault(k, []).append(rec[f"time/{k}"])
    print(f"A*-PO step, task {args.task}, responses {statistics.median(lengths):.0f} tokens "
          "(median),"
          f" batch {args.batch_size}, {args.steps} alternating steps, torch threads "
          f"{args.threads}, mixed_precision={args.mixed_precision}")  # fmt: skip
    med = {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in wall}
    for name, (w, c) in med.items():
        print(f"{name:12s} {1e3 * w:8.1f} ms/step wall, {1e3 * c:8.1f} ms/step CPU (medians)")
    print(f"ratio library / hand-written: wall {med['library'][0] / med['hand-written'][0]:.3f}, "
          f"CPU {med['library'][1] / med['hand-written'][1]:.3f} (target <= 1.05)")  # fmt: skip
    print("library phases (median wall ms): " + ", ".join(
        f"{k} {1e3 * statistics.median(x):.1f}" for k, x in phases.items()))  # fmt: skip
    with open("/proc/loadavg") as f:
        print(f"load average: {f.read().strip()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
