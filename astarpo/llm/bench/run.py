"""The efficiency benchmark: A*-PO against the baselines on the same model, data and budget.

:func:`run_bench` does, in one invocation:

1. the reference: the toy model (or a given config) fine-tuned on the addition task by
   :func:`~astarpo.llm.toy.sft.cached_sft` (cached), saved under ``out_dir/reference``;
2. Stage 1 of A*-PO (``n_samples`` reference responses per training prompt), timed on its own;
3. for every seed and algorithm, one training run in a fresh subprocess (:func:`run_one`), so
   that the peak resident memory (CPU) or the peak CUDA memory is that algorithm's alone. Every
   run sees the same prompts in the same order (same seed), the same prompt budget
   (``steps * batch_size`` prompts), the same reference and learning rate; held-out greedy
   accuracy and the KL to the reference are measured every ``eval_every`` steps, outside the
   timed training;
4. the summary (:mod:`astarpo.llm.bench.report`): ``bench.json``, ``bench.md`` (ratios to A*-PO)
   and ``bench.png`` (accuracy against training wall time).

This module runs the benchmark; the settings are in :mod:`astarpo.llm.bench.config` and the
measurements in :mod:`astarpo.llm.bench.measure`.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM

import astarpo
from astarpo.llm.algorithms.registry import ALGORITHMS
from astarpo.llm.bench import report
from astarpo.llm.bench.config import BenchConfig, algorithm_config
from astarpo.llm.bench.measure import PeakRSS, greedy_accuracy_and_kl
from astarpo.llm.data.rewards import exact_match_reward
from astarpo.llm.parallel.dist import resolve_device
from astarpo.llm.rollout.base import SamplingConfig
from astarpo.llm.rollout.hf import HFGenerator
from astarpo.llm.stage1.estimate import estimate_values
from astarpo.llm.stage1.table import ValueTable
from astarpo.llm.toy.model import addition_task, make_char_tokenizer, make_toy_model
from astarpo.llm.toy.sft import SFTConfig, cached_sft
from astarpo.llm.training.metrics import peak_memory
from astarpo.llm.training.trainer import Trainer

__all__ = ["run_bench", "run_one"]


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """One training run of the benchmark (normally in its own process; see the module doc).

    Args:
        spec: The run: keys ``algo``, ``seed``, ``config`` (a :class:`BenchConfig` as a dict),
            ``reference`` (model directory), ``values`` (V* table file), ``train`` and ``eval``
            (rows) and ``out`` (run directory).

    Returns:
        The run's record: ``algo``, ``seed``, ``evals`` (one dict per evaluation with ``step``,
        ``time``, ``cpu_time``, ``accuracy``, ``sampled_accuracy``, ``kl``), ``train_s``,
        ``cpu_train_s``, ``prompts``, ``samples_per_prompt``, ``phases`` and ``memory``.
    """
    cfg = BenchConfig(**{**spec["config"], "algos": tuple(spec["config"]["algos"])})
    torch.set_num_threads(cfg.threads)
    algo, seed = spec["algo"], int(spec["seed"])
    device = resolve_device(cfg.device)
    tokenizer = make_char_tokenizer()
    ref: Any = AutoModelForCausalLM.from_pretrained(spec["reference"])
    ref = ref.to(device).eval()
    policy = copy.deepcopy(ref).train()
    rss_before = PeakRSS.current_mb()  # before any training state (optimizer, critic)
    args = algorithm_config(algo, cfg, seed, Path(spec["out"]))
    eval_cpu = [0.0]

    rss = PeakRSS()

    def eval_fn(model: Any) -> dict[str, float]:
        c0 = time.process_time()
        rss.paused = True  # evaluation is the same for every algorithm: not in the peak
        res = greedy_accuracy_and_kl(model, ref, tokenizer, spec["eval"], cfg, seed + 7919)
        rss.paused = False
        eval_cpu[0] += time.process_time() - c0
        res["cpu_time"] = cpu_clock()
        return res

    cpu_start = [0.0]

    def cpu_clock() -> float:
        return time.process_time() - cpu_start[0] - eval_cpu[0]

    kwargs: dict[str, Any] = dict(
        train_dataset=spec["train"],
        tokenizer=tokenizer,
        eval_fn=eval_fn,
    )
    table = ValueTable.load(spec["values"]) if ALGORITHMS[algo].algorithm.needs_v_star else None
    trainer = Trainer(policy, ref, [exact_match_reward], args=args, v_star_table=table, **kwargs)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    cpu_start[0] = time.process_time()
    with rss:
        history = trainer.train()
    cpu_train = cpu_clock()
    steps = [r for r in history if "loss" in r]
    evals = [
        {
            "step": r["step"],
            "time": r["time/train_total"],
            "cpu_time": r["eval/cpu_time"],
            "accuracy": r["eval/accuracy"],
            "sampled_accuracy": r["eval/sampled_accuracy"],
            "kl": r["eval/kl"],
        }
        for r in history
        if "eval/accuracy" in r
    ]
    phases = {
        k[5:]: sum(r.get(k, 0.0) for r in steps)
        for k in ("time/generate", "time/reward", "time/ref_logprobs", "time/update")
    }
    memory = {
        "rss_before_train_mb": rss_before,
        "rss_peak_mb": rss.peak_mb,
        "ru_maxrss_mb": peak_memory(device)["memory/rss_peak_mb"],
    }
    cuda = [
        r["memory/cuda_peak_allocated_mb"] for r in steps if "memory/cuda_peak_allocated_mb" in r
    ]
    if cuda:
        memory["cuda_peak_allocated_mb"] = max(cuda)
        memory["cuda_total_mb"] = torch.cuda.get_device_properties(device).total_memory / 2**20
    return {
        "algo": algo,
        "seed": seed,
        "evals": evals,
        "train_s": trainer.train_time,
        "cpu_train_s": cpu_train,
        "prompts": cfg.steps * cfg.batch_size,
        "samples_per_prompt": trainer.algorithm.samples_per_prompt,
        "phases": phases,
        "memory": memory,
    }


#: The reference: the toy model fine-tuned on zero-padded 2-digit addition. Pinned here (not
#: read from the demo) so that a benchmark result stays reproducible when the demo changes.
REF_SEED, REF_N_TEST, REF_N_SFT = 0, 1000, 8000
REF_SFT_STEPS, REF_SFT_BATCH, REF_SFT_LR = 500, 64, 2e-3


def _reference(
    cfg: BenchConfig, out: Path
) -> tuple[Path, dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """Fine-tune (or load from the SFT cache) the reference and save it to ``out/reference``.

    ``addition_task(1000 + 8000, seed=0, zero_pad=True)``: the first 1000 problems are held
    out, the other 8000 are the SFT data (500 steps of 64, learning rate 2e-3) and the pool of
    training prompts (as in the demo).

    Returns:
        ``(path, sft_info, sft_rows, held_out_rows)``.
    """
    sft_cfg = SFTConfig(cfg.sft_steps or REF_SFT_STEPS, REF_SFT_BATCH, REF_SFT_LR)
    tokenizer = make_char_tokenizer()
    model = make_toy_model(tokenizer, seed=REF_SEED, **cfg.model_overrides)
    model = model.to(resolve_device(cfg.device))  # SFT on the benchmark's device
    problems = addition_task(REF_N_TEST + REF_N_SFT, seed=REF_SEED, zero_pad=True)
    held_out, sft_rows = problems[:REF_N_TEST], problems[REF_N_TEST:]
    model, info = cached_sft(model, tokenizer, sft_rows, sft_cfg, cfg.cache_dir, progress=False)
    path = out / "reference"
    model.save_pretrained(path)
    return path, info, sft_rows, held_out


def run_bench(cfg: BenchConfig, progress: bool = True) -> dict[str, Any]:
    """Run the whole benchmark (see the module doc) and write ``bench.json/md/png``.

    Returns:
        The content of ``bench.json``: ``{"config", "stage1", "reference", "runs", "summary"}``.
    """
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    say = print if progress else (lambda *a, **k: None)
    torch.set_num_threads(cfg.threads)
    say(f"[bench] reference (SFT, cached) -> {out / 'reference'}")
    ref_path, sft_info, sft_rows, test_rows = _reference(cfg, out)
    budget = cfg.steps * cfg.batch_size  # every training prompt is seen exactly once
    if budget > len(sft_rows) or cfg.eval_size > len(test_rows):
        raise ValueError(
            f"steps x batch_size = {budget} must be <= {len(sft_rows)} and eval_size <= "
            f"{len(test_rows)}."
        )
    train, held_out = sft_rows[:budget], test_rows[: cfg.eval_size]

    device = resolve_device(cfg.device)
    ref: Any = AutoModelForCausalLM.from_pretrained(ref_path)
    ref = ref.to(device).eval()
    tokenizer = make_char_tokenizer()
    ref_eval = greedy_accuracy_and_kl(ref, ref, tokenizer, held_out, cfg, 7919)
    say(f"[bench] reference held-out accuracy {ref_eval['accuracy']:.3f}")

    say(f"[bench] Stage 1: N={cfg.n_samples} samples x {len(train)} prompts")
    values = out / "values.jsonl"
    values.unlink(missing_ok=True)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    estimate_values(
        HFGenerator(ref, tokenizer, cfg.generation_batch_size),
        train,
        [exact_match_reward],
        cfg.n_samples,
        cfg.beta1,
        SamplingConfig(cfg.max_new_tokens, 1.0),
        values,
        seed=0,
        batch_size=max(1, cfg.generation_batch_size // cfg.n_samples),
        progress=False,
    )
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    stage1_s = time.perf_counter() - t0
    stage1 = {"seconds": stage1_s, "prompts": len(train), "n_samples": cfg.n_samples}
    del ref

    runs = []
    src = str(Path(astarpo.__file__).resolve().parents[1])  # the same astarpo in the workers
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(cfg.threads),
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    for seed in range(cfg.seeds):
        # Rotate the order per seed so slow phases of a shared machine hit every algorithm.
        order = list(cfg.algos[seed % len(cfg.algos) :]) + list(cfg.algos[: seed % len(cfg.algos)])
        for algo in order:
            run_dir = out / "runs" / f"{algo}-seed{seed}"
            spec = {
                "algo": algo,
                "seed": seed,
                "config": asdict(cfg),
                "reference": str(ref_path),
                "values": str(values),
                "train": train,
                "eval": held_out,
                "out": str(run_dir),
            }
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / "spec.json").write_text(json.dumps(spec))
            t_run = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "astarpo.llm.bench.run",
                    str(run_dir / "spec.json"),
                    str(run_dir / "result.json"),
                ],
                check=True,
                env=env,
            )
            res = json.loads((run_dir / "result.json").read_text())
            runs.append(res)
            final = res["evals"][-1]
            say(
                f"[bench] {algo:8s} seed {seed}: train {res['train_s']:.1f}s, final acc "
                f"{final['accuracy']:.3f}, kl {final['kl']:.3f} "
                f"({time.perf_counter() - t_run:.0f}s with evals and start-up)"
            )
    result = {
        "config": asdict(cfg),
        "stage1": stage1,
        "reference": {**ref_eval, "sft": sft_info},
        "runs": runs,
    }
    result["summary"] = report.summarize(result)
    report.write(result, out)
    say(f"[bench] wrote {out / 'bench.md'}, {out / 'bench.json'}, {out / 'bench.png'}")
    return result


def _main(argv: list[str]) -> int:
    spec_path, out_path = argv
    result = run_one(json.loads(Path(spec_path).read_text()))
    Path(out_path).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
