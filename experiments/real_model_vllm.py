"""Greedy answers of the real model through vLLM's CPU build and through Hugging Face
``generate``, on the same converted checkpoint and prompts (docs/real_model.md, "vLLM").

Run in ``.venv-vllm`` (``make vllm-install``) on a folder written by ``astarpo convert``::

    .venv-vllm/bin/python -m experiments.real_model_vllm runs/real_model/smollm2_hf \\
        runs/real_model/data/test.jsonl --limit 50 --out docs/figures/real_model_vllm.json

Both engines decode greedily from float32 weights with the page's prompt (chat template and
system prompt, :data:`SYSTEM_PROMPT`). Per prompt: whether the token ids are equal, where they
first differ, and whether math-verify scores the two answers alike; both clocks of each engine.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SYSTEM_PROMPT = (
    "You are a helpful math tutor. Solve the problem in one or two short sentences and end "
    "with: The answer is N."
)
"""The system prompt of every command on the page."""


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first position where two token sequences differ (a length counts), or None."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def timed(fn: Any) -> tuple[Any, dict[str, float]]:
    """``fn()`` and its wall and CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, {
        "wall_s": round(time.perf_counter() - wall, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
    }


def compare(folder: str, data: str, limit: int, max_new_tokens: int) -> dict[str, Any]:
    """Greedy rollouts of both engines on the first ``limit`` rows of ``data``, compared."""
    from astarpo.llm import (
        HFGenerator,
        MathVerifyReward,
        SamplingConfig,
        VLLMGenerator,
        load_causal_lm,
        load_prompts,
    )

    model, tokenizer = load_causal_lm(folder)
    rows = load_prompts(
        data,
        template="none",
        tokenizer=tokenizer,
        chat_template=True,
        system_prompt=SYSTEM_PROMPT,
        limit=limit,
    )
    prompts = [r["prompt"] for r in rows]
    greedy = SamplingConfig(max_new_tokens, 0.0, 1.0)
    hf, hf_time = timed(lambda: HFGenerator(model, tokenizer, 32).generate(prompts, 1, greedy, 0))
    engine, start = timed(lambda: VLLMGenerator(folder, tokenizer, dtype="float32"))
    vl, vl_time = timed(lambda: engine.generate(prompts, 1, greedy, 0))
    reward = MathVerifyReward(n_workers=1)
    try:
        answers = [r["answer"] for r in rows]
        hf_scores = reward(prompts, hf.completions, answer=answers)
        vl_scores = reward(prompts, vl.completions, answer=answers)
    finally:
        reward.close()
    per_prompt = [
        {
            "equal": a == b,
            "first_difference": first_difference(a, b),
            "tokens": [len(a), len(b)],
            "correct": [float(x or 0), float(y or 0)],
        }
        for a, b, x, y in zip(hf.response_ids, vl.response_ids, hf_scores, vl_scores, strict=True)
    ]
    differ = [p for p in per_prompt if not p["equal"]]
    return {
        "model": folder,
        "prompts": len(rows),
        "max_new_tokens": max_new_tokens,
        "equal_token_ids": len(rows) - len(differ),
        "same_score": sum(p["correct"][0] == p["correct"][1] for p in per_prompt),
        "accuracy": {
            "hf": sum(p["correct"][0] for p in per_prompt) / len(rows),
            "vllm": sum(p["correct"][1] for p in per_prompt) / len(rows),
        },
        "first_difference_of_unequal": [p["first_difference"] for p in differ],
        "time": {"hf_generate": hf_time, "vllm_start": start, "vllm_generate": vl_time},
        "per_prompt": per_prompt,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m experiments.real_model_vllm FOLDER DATA [--limit N] [--out JSON]``."""
    p = argparse.ArgumentParser(prog="python -m experiments.real_model_vllm", description=__doc__)
    p.add_argument("folder", help="a model folder written by astarpo convert")
    p.add_argument("data", help="the held-out problems (JSONL)")
    p.add_argument("--limit", type=int, default=50, help="first N problems (50)")
    p.add_argument("--max-new-tokens", type=int, default=96, help="per response (96)")
    p.add_argument("--out", help="write the comparison as JSON here")
    args = p.parse_args(argv)
    result = compare(args.folder, args.data, args.limit, args.max_new_tokens)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "per_prompt"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
