"""Held-out accuracy of the benchmark's reference after a given number of SFT steps.

Run from the repository root::

    python benchmarks/sft_reference_probe.py 470 480 490 496 498 499 500

For each step count: the toy model fine-tuned by :func:`astarpo.llm.toy.sft.cached_sft` exactly
as ``astarpo bench`` does (batch 64, learning rate 2e-3, the 8000 SFT problems; cached), then
on the first 400 held-out problems: one sample at temperature 1, the expected sampled accuracy
(:func:`astarpo.llm.bench.measure.answer_probability`) and greedy accuracy. This is how the
default ``sft_steps`` of :class:`astarpo.llm.bench.config.BenchConfig` was chosen.
"""

from __future__ import annotations

import sys
import time

import torch

from astarpo.llm.bench.measure import answer_probability
from astarpo.llm.data.rewards import exact_match_reward
from astarpo.llm.rollout.base import SamplingConfig
from astarpo.llm.rollout.hf import HFGenerator
from astarpo.llm.toy.model import addition_task, make_char_tokenizer, make_toy_model
from astarpo.llm.toy.sft import SFTConfig, cached_sft


def main(argv: list[str]) -> int:
    """Print one line per step count."""
    torch.set_num_threads(1)
    tok = make_char_tokenizer()
    problems = addition_task(9000, seed=0, zero_pad=True)
    held, rows = problems[:400], problems[1000:]
    prompts, answers = [r["prompt"] for r in held], [r["answer"] for r in held]
    for steps in map(int, argv or ["500"]):
        t0 = time.perf_counter()
        model = make_toy_model(tok, seed=0)
        model, _ = cached_sft(model, tok, rows, SFTConfig(steps, 64, 2e-3), progress=False)
        model.eval()
        gen = HFGenerator(model, tok, 256)
        sampled = gen.generate(prompts, 1, SamplingConfig(5, 1.0), 1).completions
        greedy = gen.generate(prompts, 1, SamplingConfig(5, 0.0), 1).completions
        acc = sum(exact_match_reward(prompts, sampled, answers)) / len(held)  # type: ignore[arg-type]
        g = sum(exact_match_reward(prompts, greedy, answers)) / len(held)  # type: ignore[arg-type]
        exp = float(answer_probability(model, tok, held).mean())
        print(
            f"{steps} SFT steps: sampled {acc:.3f}, expected {exp:.3f}, greedy {g:.3f} "
            f"({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
