"""Stage 1 generation throughput: Hugging Face ``generate`` vs vLLM, same model and prompts.

Run from the repository root (vLLM installed; on CPU in ``.venv-vllm``, see ``make test-vllm``)::

    .venv-vllm/bin/python -m experiments.benchmarks.vllm_throughput                  # embedded toy
    model, CPU
    python -m experiments.benchmarks.vllm_throughput --model ./Qwen2.5-1.5B --data train.jsonl   #
    a GPU

Both backends are driven through the :class:`~astarpo.llm.rollout.base.Generator` interface as
``astarpo value`` drives them (``--prompts-per-call`` prompts per call, ``--n-samples`` each,
seeds from :func:`astarpo.llm.rollout.base.derive_seed` of the batch's prompt keys), in float32
on CPU and bfloat16 on a GPU. One warm-up call per backend and the engine start (printed apart)
are not timed. Prints each backend's samples/s and tokens/s and the ratio vLLM / HF.
"""

from __future__ import annotations

import json
import tempfile
import time
from typing import Any

from experiments.benchmarks.common import parser, seconds


def _rates(gen: Any, prompts: list[str], sampling: Any, args: Any) -> dict[str, float]:
    """``samples_per_s`` and ``tokens_per_s`` of ``gen`` on ``prompts`` after a warm-up call."""
    from astarpo.llm import derive_seed, prompt_key

    n, batch_size = args.n_samples, args.prompts_per_call
    gen.generate(prompts[:batch_size], n, sampling, 12345)  # warm-up, not timed
    samples = tokens = 0
    t0 = time.perf_counter()
    for i in range(0, len(prompts), batch_size):
        batch = prompts[i : i + batch_size]
        rollout = gen.generate(batch, n, sampling, derive_seed(0, *(prompt_key(p) for p in batch)))
        samples += len(rollout)
        tokens += sum(len(r) for r in rollout.response_ids)
    secs = time.perf_counter() - t0
    return {"samples_per_s": samples / secs, "tokens_per_s": tokens / secs}


def main() -> None:
    args = parser(
        __doc__.split("\n")[0],
        model=("toy", "a saved HF model directory, or 'toy'"),
        data=("", "prompt file (default: toy addition prompts)"),
        prompts=(256, "number of prompts (256)"),
        n_samples=(8, "responses per prompt (8)"),
        max_new_tokens=(32, "per response (32)"),
        prompts_per_call=(8, "prompts per generate call (8)"),
        generation_batch_size=(64, "HF rows per generate (64)"),
        gpu_memory_utilization=0.5,
    ).parse_args()

    import torch

    from astarpo.llm import (
        HFGenerator,
        SamplingConfig,
        VLLMGenerator,
        addition_task,
        load_pretrained_model,
        load_prompts,
        load_tokenizer,
    )

    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    tok = load_tokenizer(args.model)
    model = load_pretrained_model(args.model, dtype=dtype, device=device)
    model = model.to(dtype).eval()
    if args.data:
        prompts = [r["prompt"] for r in load_prompts(args.data, limit=args.prompts)]
    else:
        prompts = [r["prompt"] for r in addition_task(args.prompts, seed=0)]
    sampling = SamplingConfig(args.max_new_tokens, 1.0, 1.0)
    rates = {
        "hf": _rates(HFGenerator(model, tok, args.generation_batch_size), prompts, sampling, args)
    }
    with tempfile.TemporaryDirectory() as tmp:
        kw = dict(gpu_memory_utilization=args.gpu_memory_utilization, dtype=dtype, seed=0)
        start_s, vgen = seconds(VLLMGenerator.from_model, model, tok, tmp, **kw)
        rates["vllm"] = _rates(vgen, prompts, sampling, args)
    r = {"model": args.model, "device": device, "dtype": dtype, "prompts": len(prompts)}
    r.update({k: getattr(args, k) for k in ("n_samples", "max_new_tokens", "prompts_per_call")})
    r.update({f"{name}_{k}": v for name, rate in rates.items() for k, v in rate.items()})
    r.update(vllm_engine_start_s=start_s)
    r["ratio_vllm_over_hf"] = r["vllm_samples_per_s"] / r["hf_samples_per_s"]
    print(json.dumps(r))
    print(
        f"Stage 1 generation, {len(prompts)} prompts x {args.n_samples} samples, "
        f"{args.max_new_tokens} new tokens max, {device} {dtype}: "
        f"HF {r['hf_samples_per_s']:.1f} samples/s ({r['hf_tokens_per_s']:.0f} tok/s), vLLM "
        f"{r['vllm_samples_per_s']:.1f} samples/s ({r['vllm_tokens_per_s']:.0f} tok/s; "
        f"engine start {start_s:.1f} s): vLLM / HF = {r['ratio_vllm_over_hf']:.2f}x"
    )


if __name__ == "__main__":  # vLLM may start worker processes with spawn
    main()
