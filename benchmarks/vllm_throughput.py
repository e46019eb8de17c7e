"""Stage 1 generation throughput: Hugging Face ``generate`` vs vLLM, same model and prompts.

Run from the repository root (vLLM installed; on CPU in ``.venv-vllm``, see ``make test-vllm``)::

    .venv-vllm/bin/python benchmarks/vllm_throughput.py                  # embedded toy model, CPU
    python benchmarks/vllm_throughput.py --model ./Qwen2.5-1.5B --data train.jsonl   # a GPU

Both backends are driven through the :class:`~astarpo.llm.rollout.base.Generator` interface
exactly as ``astarpo value`` drives them: ``--prompts-per-call`` prompts per ``generate`` call,
``--n-samples`` responses each, seeds from :func:`astarpo.llm.rollout.base.derive_seed` of the
batch's prompt keys (as Stage 1). One warm-up call per backend is not timed, nor is the engine
start (printed separately). Prints samples/s and generated tokens/s of each backend and the
ratio vLLM / HF, from this one run.

The model runs in float32 on CPU and bfloat16 on a GPU, in both backends.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from typing import Any


def _time_backend(
    gen: Any, prompts: list[str], n: int, sampling: Any, batch_size: int
) -> tuple[float, int, int]:
    from astarpo.llm.data.prompts import prompt_key
    from astarpo.llm.rollout.base import derive_seed

    gen.generate(prompts[:batch_size], n, sampling, 12345)  # warm-up, not timed
    samples = tokens = 0
    t0 = time.perf_counter()
    for i in range(0, len(prompts), batch_size):
        batch = prompts[i : i + batch_size]
        rollout = gen.generate(batch, n, sampling, derive_seed(0, *(prompt_key(p) for p in batch)))
        samples += len(rollout)
        tokens += sum(len(r) for r in rollout.response_ids)
    return time.perf_counter() - t0, samples, tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="toy", help="a saved HF model directory, or 'toy'")
    ap.add_argument("--data", help="prompt file (default: toy addition prompts)")
    ap.add_argument("--prompts", type=int, default=256, help="number of prompts (256)")
    ap.add_argument("--n-samples", type=int, default=8, help="responses per prompt (8)")
    ap.add_argument("--max-new-tokens", type=int, default=32, help="per response (32)")
    ap.add_argument("--prompts-per-call", type=int, default=8, help="prompts per generate call (8)")
    ap.add_argument(
        "--generation-batch-size", type=int, default=64, help="HF rows per generate (64)"
    )
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.5)
    args = ap.parse_args()

    import torch

    from astarpo.commands.common import load_model
    from astarpo.llm.rollout.base import SamplingConfig
    from astarpo.llm.rollout.hf import HFGenerator
    from astarpo.llm.rollout.vllm import VLLMGenerator
    from astarpo.llm.toy.problems import addition_task

    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = "bfloat16" if device == "cuda" else "float32"
    model, tok = load_model(args.model, device, dtype)
    model = model.to(getattr(torch, dtype)).eval()
    if args.data:
        from astarpo.llm.data.prompts import load_prompts

        prompts = [r["prompt"] for r in load_prompts(args.data, limit=args.prompts)]
    else:
        prompts = [r["prompt"] for r in addition_task(args.prompts, seed=0)]
    sampling = SamplingConfig(args.max_new_tokens, 1.0, 1.0)
    hf = HFGenerator(model, tok, batch_size=args.generation_batch_size)
    hf_s, hf_n, hf_tok = _time_backend(hf, prompts, args.n_samples, sampling, args.prompts_per_call)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        vgen = VLLMGenerator.from_model(
            model,
            tok,
            tmp,
            gpu_memory_utilization=args.gpu_memory_utilization,
            dtype=dtype,
            seed=0,
        )
        start_s = time.perf_counter() - t0
        v_s, v_n, v_tok = _time_backend(
            vgen, prompts, args.n_samples, sampling, args.prompts_per_call
        )
    result = {
        "model": args.model,
        "device": device,
        "dtype": dtype,
        "prompts": len(prompts),
        "n_samples": args.n_samples,
        "max_new_tokens": args.max_new_tokens,
        "prompts_per_call": args.prompts_per_call,
        "hf_samples_per_s": hf_n / hf_s,
        "hf_tokens_per_s": hf_tok / hf_s,
        "vllm_samples_per_s": v_n / v_s,
        "vllm_tokens_per_s": v_tok / v_s,
        "vllm_engine_start_s": start_s,
        "ratio_vllm_over_hf": (v_n / v_s) / (hf_n / hf_s),
    }
    print(json.dumps(result))
    print(
        f"Stage 1 generation, {len(prompts)} prompts x {args.n_samples} samples, "
        f"{args.max_new_tokens} new tokens max, {device} {dtype}: "
        f"HF {result['hf_samples_per_s']:.1f} samples/s "
        f"({result['hf_tokens_per_s']:.0f} tok/s), vLLM "
        f"{result['vllm_samples_per_s']:.1f} samples/s ({result['vllm_tokens_per_s']:.0f} tok/s; "
        f"engine start {start_s:.1f} s): vLLM / HF = {result['ratio_vllm_over_hf']:.2f}x"
    )


if __name__ == "__main__":  # vLLM may start worker processes with spawn
    main()
