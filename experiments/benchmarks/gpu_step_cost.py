"""Step cost and peak memory of A*-PO against the baselines at a real model's shape, on one GPU.

Run from the repository root (a CUDA machine; ``--device cpu --shape tiny`` checks it on CPU)::

    python -m experiments.benchmarks.gpu_step_cost --shape qwen2.5-1.5b --prompts 128 --new-tokens
    256 \
        --algos astarpo,grpo,rebel,ppo --steps 3 --out gpu_step_cost.json

What it measures, per algorithm, each in a fresh process (so each peak is its own): the
library's trainer in the paper's shape (2 minibatches per batch, entropy 0.001, gradient
clip 1.0, N = G = 8, beta2 1e-3, bf16 autocast, float32 weights and AdamW state) on
``--prompts`` prompts per step of ``--prompt-tokens`` tokens, ``--new-tokens`` new tokens per
response; a warm-up step, then ``--steps`` timed ones (wall seconds per step and per phase),
and the peak CUDA memory allocated. A*-PO's Stage 1 (N samples of the same prompts) is timed
once in its process. Prints A*-PO's step cost over each algorithm's (the geometric mean of the
ratios of steps paired by index, 95% interval) and the peak-memory ratios.

The model is a randomly initialized ``Qwen2ForCausalLM`` of the named shape (no weights are
downloaded: the shape's numbers are in :data:`SHAPES`) and the tokenizer a word-level one of
the shape's vocabulary size, so the LM head and the logits cost what the real model's do.
A random model rarely samples EOS: every response runs to ``--new-tokens``, the same length
for every algorithm. The reward is a fixed hash of the completion (0 or 1): the advantages are
not zero, so no update is skipped; what is learned is meaningless, only the time is read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

from experiments.benchmarks.common import parser

#: Model shapes (``Qwen2Config`` fields); qwen2.5-1.5b and -0.5b as their published configs.
SHAPES: dict[str, dict[str, Any]] = {
    "qwen2.5-1.5b": dict(
        vocab_size=151936,
        hidden_size=1536,
        intermediate_size=8960,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        rope_theta=1e6,
        rms_norm_eps=1e-6,
    ),
    "qwen2.5-0.5b": dict(
        vocab_size=151936,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        rope_theta=1e6,
        rms_norm_eps=1e-6,
    ),
    "tiny": dict(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    ),
}
#: The paper's training shape (its section 5) and group sizes.
SHAPE = dict(minibatches=2, entropy_coef=1e-3, max_grad_norm=1.0)
N = G = 8


def hash_reward(prompts: Any, completions: Any, **_: Any) -> list[float]:
    """1.0 or 0.0 from a CRC of the completion: fixed, content-blind, about half ones."""
    return [float(zlib.crc32(c.encode()) % 2) for c in completions]


def make_tokenizer(vocab_size: int) -> Any:
    """A word-level tokenizer of ``vocab_size`` ids: specials, the digits, ``+``, ``=``, then
    filler words ``<wI>``."""
    from astarpo.llm import make_word_tokenizer

    words = [*"0123456789+=", *(f"<w{i}>" for i in range(15, vocab_size))]
    return make_word_tokenizer(words, split="<w[0-9]+>|.")


def child(args: Any) -> dict[str, Any]:
    """One algorithm's run in this process: ``{"algo", "steps", "stage1_s", "peak_mb", ...}``."""
    import numpy as np
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from astarpo.llm import ALGORITHMS, Stage1Config, Trainer, build_generator, estimate_values

    device = torch.device(args.device)
    shape = SHAPES[args.shape]
    tok = make_tokenizer(shape["vocab_size"])
    config = Qwen2Config(  # type: ignore[call-arg]
        **shape,
        max_position_embeddings=args.prompt_tokens + args.new_tokens + 8,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=1,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    with device:
        policy = Qwen2ForCausalLM(config).float()
        ref = Qwen2ForCausalLM(config).float().eval()
    ref.load_state_dict(policy.state_dict())
    rng = np.random.default_rng(0)
    rows = [
        {"prompt": "".join(map(str, rng.integers(0, 10, args.prompt_tokens - 1))) + "="}
        for _ in range(args.prompts)
    ]  # every step takes the whole pool: one Stage 1 table covers every step
    common: dict[str, Any] = dict(
        output_dir=tempfile.mkdtemp(),
        seed=0,
        max_steps=args.steps + 1,
        batch_size=args.prompts,
        learning_rate=1e-6,
        max_new_tokens=args.new_tokens,
        generation_batch_size=args.generation_batch,
        micro_batch_size=args.micro_batch,
        device=args.device,
        report_to="none",
        progress=False,
        save_steps=0,
        **SHAPE,
    )
    cfg_type = ALGORITHMS[args.algo].config
    fields = {f for f in cfg_type.__dataclass_fields__}
    extra: dict[str, Any] = {"group_size": G} if "group_size" in fields else {}
    args_cfg = cfg_type(**common, **extra)
    table, stage1_s = None, 0.0
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    if args.algo == "astarpo":
        gen = build_generator("hf", ref, tok, batch_size=args.generation_batch, seed=0)
        s1 = Stage1Config(
            n_samples=N,
            max_new_tokens=args.new_tokens,
            prompts_per_call=max(1, args.generation_batch // N),
            progress=False,
        )
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        sync()
        t0 = time.perf_counter()
        table = estimate_values(gen, rows, [hash_reward], s1)
        sync()
        stage1_s = time.perf_counter() - t0
    trainer = Trainer(
        policy,
        ref,
        [hash_reward],
        args=args_cfg,
        train_dataset=rows,
        v_star_table=table,
        tokenizer=tok,
    )
    history = [r for r in trainer.train() if "loss" in r]
    phases = ("generate", "reward", "ref_logprobs", "update")
    steps = [
        {"total": sum(float(r.get(f"time/{p}", 0.0)) for p in phases)}
        | {p: float(r.get(f"time/{p}", 0.0)) for p in phases}
        | {"response_tokens": float(r.get("response_length/mean", 0.0))}
        for r in history
    ]
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    return {
        "algo": args.algo,
        "samples_per_prompt": trainer.algorithm.samples_per_prompt,
        "warmup": steps[0],
        "steps": steps[1:],
        "stage1_s": stage1_s,
        "stage1_prompts": args.prompts,
        "peak_allocated_mb": peak,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
    }


def main() -> None:
    ap = parser(
        __doc__.splitlines()[0],
        shape=("qwen2.5-1.5b", f"one of {', '.join(SHAPES)}"),
        prompts=(128, "prompts per step"),
        prompt_tokens=(128, "tokens per prompt"),
        new_tokens=(256, "new tokens per response (a random model runs to the limit)"),
        steps=(3, "timed steps after one warm-up step"),
        algos=("astarpo,grpo,rebel,ppo", "algorithms, comma-separated; astarpo first"),
        generation_batch=(1024, "rows per generate call"),
        micro_batch=(16, "sequences per forward/backward pass"),
        device=("cuda", "cuda or cpu"),
        out=("gpu_step_cost.json", "the JSON written (updated after every algorithm)"),
        algo=("", "internal: run this one algorithm here and print its JSON"),
    )
    args = ap.parse_args()
    if args.algo:
        print(json.dumps(child(args)))
        return
    from astarpo.analysis import paired_ratio

    result: dict[str, Any] = {"settings": vars(args) | {"N": N, "G": G, **SHAPE}, "runs": {}}
    for algo in args.algos.split(","):
        cmd = [sys.executable, __file__, *sys.argv[1:], "--algo", algo]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=os.environ)
        if done.returncode:
            print(done.stderr[-3000:], file=sys.stderr)
            result["runs"][algo] = {"error": done.stderr[-2000:]}
        else:
            result["runs"][algo] = json.loads(done.stdout.strip().splitlines()[-1])
            result["runs"][algo]["process_s"] = time.perf_counter() - t0
        Path(args.out).write_text(json.dumps(result, indent=1))
        print(f"[gpu] {algo}: {json.dumps(result['runs'][algo])[:400]}", flush=True)
    base = result["runs"].get("astarpo", {})
    ratios = {}
    for algo, run in result["runs"].items():
        if algo == "astarpo" or "steps" not in run or "steps" not in base:
            continue
        a = [s["total"] for s in base["steps"]]
        b = [s["total"] for s in run["steps"]][: len(a)]
        ratios[algo] = {"step_cost": paired_ratio(a[: len(b)], b)}
        if base.get("peak_allocated_mb") and run.get("peak_allocated_mb"):
            ratios[algo]["peak_memory"] = base["peak_allocated_mb"] / run["peak_allocated_mb"]
        print(f"[gpu] A*-PO / {algo}: {ratios[algo]}", flush=True)
    result["ratios"] = ratios
    Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
