"""GPU variant of ``astarpo bench``: a larger Qwen2-style model, bf16, one H100/H200-class GPU.

Same harness as the CPU benchmark (:func:`astarpo.llm.bench.run_bench`): a randomly
initialized Qwen2-style model (about 30M parameters by default) is fine-tuned on the synthetic
addition task (cached), then A*-PO, GRPO, RLOO, PPO and REBEL each train in a fresh process on
the same wall-clock protocol (A*-PO's Stage 1 inside the budget, learning rates from a sweep),
with bf16 autocast. Per-algorithm peak memory is ``torch.cuda.max_memory_allocated``.

Generation uses Hugging Face ``generate`` (the trainer's default generator); vLLM is not used
even when installed, because the char-level toy tokenizer and per-step weight sync are not
wired to it yet.

Run (not yet run on a GPU with this protocol: about 3 x 6 x 120 s of training plus the
sweep and evaluations, some 50 minutes)::

    python benchmarks/gpu_bench.py --out runs/gpu_bench

``--smoke`` shrinks everything so the script's code path can be checked on a CPU in a minute.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

#: The model: Qwen2 layout with grouped-query attention, tied embeddings.
MODEL = {
    "hidden_size": 512,
    "intermediate_size": 1536,
    "num_hidden_layers": 8,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
}


def main(argv: list[str] | None = None) -> int:
    """Run the GPU benchmark and print its Markdown table; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/gpu_bench")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--max-train-seconds", type=float, default=120.0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr-grid", default="1e-5,3e-5,1e-4")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for a CPU check")
    args = parser.parse_args(argv)

    import torch

    from astarpo.llm.bench.config import BenchConfig
    from astarpo.llm.bench.run import run_bench

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("No CUDA device: run with --device cpu --smoke to check the code path.")
        return 2
    model = dict(MODEL)
    sizes: dict[str, object] = dict(
        max_train_seconds=args.max_train_seconds,
        eval_every_seconds=args.max_train_seconds / 8,
        sweep_seconds=args.max_train_seconds / 3,
        lr_grid=tuple(float(x) for x in args.lr_grid.split(",")),
        batch_size=args.batch_size,
        pool_size=4000,
        eval_size=500,
        sft_steps=1500,
        generation_batch_size=1024,
    )
    if args.smoke:
        model.update(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
        )
        sizes = dict(
            max_train_seconds=3.0,
            eval_every_seconds=1.5,
            lr_grid=(3e-4,),
            batch_size=4,
            pool_size=16,
            eval_size=8,
            val_size=8,
            sft_steps=5,
            generation_batch_size=64,
        )
    cfg = BenchConfig(
        out_dir=args.out,
        seeds=args.seeds if not args.smoke else 2,
        model_overrides=model,
        device=args.device,
        mixed_precision="bf16" if args.device.startswith("cuda") else "no",
        threads=4,
        **sizes,  # type: ignore[arg-type]
    )
    t0 = time.perf_counter()
    result = run_bench(cfg)
    wall = time.perf_counter() - t0
    env = {
        "wall_s": wall,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "argv": sys.argv,
    }
    (Path(args.out) / "environment.json").write_text(json.dumps(env, indent=1))
    print((Path(args.out) / "bench.md").read_text())
    print(f"total wall time {wall:.0f} s on {env['gpu'] or 'CPU'}")
    return 0 if result["runs"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
