"""The efficiency benchmark: A*-PO against the baselines on the same model, data and budget.

:func:`run_bench` does, in one invocation:

1. the reference: the toy model (or a given config) fine-tuned on the addition task by
   :func:`~astarpo.llm.sft.cached_sft` (cached), saved under ``out_dir/reference``;
2. Stage 1 of A*-PO (``n_samples`` reference responses per training prompt), timed on its own;
3. for every seed and algorithm, one training run in a fresh subprocess (:func:`run_one`), so
   that the peak resident memory (CPU) or the peak CUDA memory is that algorithm's alone. Every
   run sees the same prompts in the same order (same seed), the same prompt budget
   (``steps * batch_size`` prompts), the same reference and learning rate; held-out greedy
   accuracy and the KL to the reference are measured every ``eval_every`` steps, outside the
   timed training;
4. the summary (:mod:`astarpo.llm.bench_report`): ``bench.json``, ``bench.md`` (ratios to A*-PO)
   and ``bench.png`` (accuracy against training wall time).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ALGORITHMS", "BenchConfig", "PeakRSS", "run_bench", "run_one"]

#: The algorithms the benchmark knows, in table order.
ALGORITHMS: tuple[str, ...] = ("astarpo", "grpo", "rloo", "ppo", "rebel")


@dataclass(frozen=True)
class BenchConfig:
    """Settings of :func:`run_bench` (shared by every algorithm unless the name says otherwise).

    Args:
        out_dir: Output directory (reference, values, runs, bench.json/md/png).
        algos: Algorithms to compare; must include ``"astarpo"`` (the ratio baseline).
        seeds: Number of seeds (0 .. seeds-1) per algorithm. Default 2.
        steps: Training steps per run. Default 20.
        batch_size: Prompts per step (prompt budget = steps * batch_size). Default 32.
        eval_every: Steps between held-out evaluations. Default 2.
        eval_size: Held-out prompts, disjoint from training. Default 300.
        learning_rate: AdamW learning rate of every algorithm. Default 3e-4.
        max_new_tokens: Token budget per response. Default 5 (as in the demo).
        n_samples: Stage 1 reference samples per prompt (N). Default 8.
        beta1: Stage 1 KL strength. Default 0.5.
        beta2: A*-PO regression strength. Default 1e-3 (as in the paper).
        group_size: GRPO/RLOO samples per prompt (G). Default 8.
        eta: REBEL's step size (1/eta is comparable to beta2). Default 1e3.
        target_accuracy: Held-out accuracy whose first crossing is timed; 0 (default) picks
            ``ref + 0.8 * (min_algo mean final - ref)``, reachable by every algorithm that
            improves on the reference.
        sft_steps: SFT steps of the reference; 0 (default) = 500.
        model_overrides: ``Qwen2Config`` fields for a larger model (empty: the toy default).
        device: ``"cpu"``, ``"cuda"`` or ``"auto"``. Default ``"cpu"``.
        mixed_precision: ``"auto"`` (bf16 autocast on CUDA), ``"bf16"`` or ``"no"``.
        threads: Torch CPU threads per run. Default 1 (steadier timings on a shared machine).
        generation_batch_size: Rows per ``generate`` call. Default 256.
        cache_dir: SFT cache directory (None: ``$ASTARPO_CACHE`` or ``~/.cache/astarpo``).
    """

    out_dir: str = "runs/bench"
    algos: tuple[str, ...] = ALGORITHMS
    seeds: int = 2
    steps: int = 20
    batch_size: int = 32
    eval_every: int = 2
    eval_size: int = 300
    learning_rate: float = 3e-4
    max_new_tokens: int = 5
    n_samples: int = 8
    beta1: float = 0.5
    beta2: float = 1e-3
    group_size: int = 8
    eta: float = 1e3
    target_accuracy: float = 0.0
    sft_steps: int = 0
    model_overrides: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    mixed_precision: str = "auto"
    threads: int = 1
    generation_batch_size: int = 256
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        unknown = [a for a in self.algos if a not in ALGORITHMS]
        if unknown or "astarpo" not in self.algos:
            raise ValueError(
                f"algos must be drawn from {ALGORITHMS} and include 'astarpo' (the baseline of "
                f"the ratios); got {self.algos}."
            )
        if self.sft_steps < 0:
            raise ValueError(f"sft_steps must be >= 0 (0 = default), got {self.sft_steps}.")
        for name in (
            "seeds",
            "steps",
            "batch_size",
            "eval_every",
            "eval_size",
            "max_new_tokens",
            "n_samples",
            "threads",
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}.")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2, got {self.group_size}.")
        if not 0.0 <= self.target_accuracy <= 1.0:
            raise ValueError(
                f"target_accuracy must be in [0, 1] (0 = automatic), got {self.target_accuracy}."
            )


class PeakRSS:
    """Peak *current* resident memory of this process while the ``with`` block runs.

    ``ru_maxrss`` is a lifetime peak, usually set by importing and loading (a tiny model's
    training never exceeds it), so a thread reads ``/proc/self/statm`` every ``interval``
    seconds instead. ``start_mb`` is the resident size on entry, ``peak_mb`` the largest sample;
    ``peak_mb - start_mb`` is what training added. Where ``/proc`` is missing (macOS), both fall
    back to ``ru_maxrss``.
    """

    def __init__(self, interval: float = 0.002) -> None:
        self.interval = interval
        self.start_mb = 0.0
        self.peak_mb = 0.0
        self._stop = False
        self._thread: Any = None
        self.paused = False  # set True to ignore a phase (e.g. evaluation)

    @staticmethod
    def current_mb() -> float:
        """Current resident set size in MiB."""
        try:
            with open("/proc/self/statm") as f:
                pages = int(f.read().split()[1])
            return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
        except OSError:
            import resource

            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            return rss / 2**20 if sys.platform == "darwin" else rss / 1024

    def _loop(self) -> None:
        while not self._stop:
            if not self.paused:
                self.peak_mb = max(self.peak_mb, self.current_mb())
            time.sleep(self.interval)

    def __enter__(self) -> PeakRSS:
        import threading

        self.start_mb = self.peak_mb = self.current_mb()
        self._stop = False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self._thread.join()
        if not self.paused:
            self.peak_mb = max(self.peak_mb, self.current_mb())


def _algorithm_config(name: str, cfg: BenchConfig, seed: int, out: Path) -> Any:
    from astarpo.llm.baseline_config import GRPOConfig, PPOConfig, REBELConfig, RLOOConfig
    from astarpo.llm.config import AStarPOConfig

    common: dict[str, Any] = dict(
        output_dir=str(out),
        seed=seed,
        max_steps=cfg.steps,
        batch_size=cfg.batch_size,
        learning_rate=cfg.learning_rate,
        max_new_tokens=cfg.max_new_tokens,
        save_steps=0,
        device=cfg.device,
        mixed_precision=cfg.mixed_precision,
        tensorboard=False,
        progress=False,
        generation_batch_size=cfg.generation_batch_size,
    )
    if name == "astarpo":
        return AStarPOConfig(beta2=cfg.beta2, **common)
    if name == "grpo":
        return GRPOConfig(group_size=cfg.group_size, **common)
    if name == "rloo":
        return RLOOConfig(group_size=cfg.group_size, **common)
    if name == "ppo":
        return PPOConfig(**common)
    if name == "rebel":
        return REBELConfig(eta=cfg.eta, **common)
    raise ValueError(f"unknown algorithm {name!r}; expected one of {ALGORITHMS}.")


def _greedy_accuracy_and_kl(
    model: Any, ref: Any, tokenizer: Any, rows: list[dict[str, Any]], cfg: BenchConfig, seed: int
) -> dict[str, float]:
    """Greedy and sampled (temperature 1, one sample) exact-match accuracy on ``rows``, and the
    sequence KL to ``ref`` estimated on the sampled responses (mean of log pi - log pi_ref)."""
    import torch

    from astarpo.llm.generation import HFGenerator, SamplingConfig
    from astarpo.llm.logprobs import sequence_logprobs
    from astarpo.llm.rewards import exact_match_reward

    gen = HFGenerator(model, tokenizer, cfg.generation_batch_size)
    prompts = [r["prompt"] for r in rows]
    greedy = gen.generate(prompts, 1, SamplingConfig(cfg.max_new_tokens, 0.0), seed)
    answers = [r["answer"] for r in rows]
    correct = exact_match_reward(prompts, greedy.completions, answers)
    sampled = gen.generate(prompts, 1, SamplingConfig(cfg.max_new_tokens, 1.0), seed + 1)
    sampled_ok = exact_match_reward(prompts, sampled.completions, answers)
    pad = int(tokenizer.pad_token_id)
    with torch.no_grad():
        logp = sequence_logprobs(model, sampled.prompt_ids, sampled.response_ids, pad).logp
        logp_ref = sequence_logprobs(ref, sampled.prompt_ids, sampled.response_ids, pad).logp
    return {
        "accuracy": float(sum(c or 0.0 for c in correct) / len(rows)),
        "sampled_accuracy": float(sum(c or 0.0 for c in sampled_ok) / len(rows)),
        "kl": float((logp - logp_ref).mean()),
    }


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
    import torch
    from transformers import AutoModelForCausalLM

    from astarpo.llm import baselines
    from astarpo.llm.metrics import peak_memory
    from astarpo.llm.rewards import exact_match_reward
    from astarpo.llm.toy import make_char_tokenizer
    from astarpo.llm.trainer import AStarPOTrainer, resolve_device
    from astarpo.llm.value import ValueTable

    cfg = BenchConfig(**{**spec["config"], "algos": tuple(spec["config"]["algos"])})
    torch.set_num_threads(cfg.threads)
    algo, seed = spec["algo"], int(spec["seed"])
    device = resolve_device(cfg.device)
    tokenizer = make_char_tokenizer()
    ref: Any = AutoModelForCausalLM.from_pretrained(spec["reference"])
    ref = ref.to(device).eval()
    policy = copy.deepcopy(ref).train()
    rss_before = PeakRSS.current_mb()  # before any training state (optimizer, critic)
    args = _algorithm_config(algo, cfg, seed, Path(spec["out"]))
    eval_cpu = [0.0]

    rss = PeakRSS()

    def eval_fn(model: Any) -> dict[str, float]:
        c0 = time.process_time()
        rss.paused = True  # evaluation is the same for every algorithm: not in the peak
        res = _greedy_accuracy_and_kl(model, ref, tokenizer, spec["eval"], cfg, seed + 7919)
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
        eval_steps=cfg.eval_every,
    )
    rewards = [exact_match_reward]
    trainers = {
        "grpo": baselines.GRPOTrainer,
        "rloo": baselines.RLOOTrainer,
        "ppo": baselines.PPOTrainer,
        "rebel": baselines.REBELTrainer,
    }
    if algo == "astarpo":
        table = ValueTable.load(spec["values"])
        trainer: Any = AStarPOTrainer(policy, ref, rewards, args=args, v_star_table=table, **kwargs)
    else:
        trainer = trainers[algo](policy, ref, rewards, args=args, **kwargs)
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
    from astarpo.llm.sft import SFTConfig, cached_sft
    from astarpo.llm.toy import addition_task, make_char_tokenizer, make_toy_model
    from astarpo.llm.trainer import resolve_device

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
    import torch

    from astarpo.llm import bench_report
    from astarpo.llm.generation import HFGenerator, SamplingConfig
    from astarpo.llm.rewards import exact_match_reward
    from astarpo.llm.toy import make_char_tokenizer
    from astarpo.llm.trainer import resolve_device
    from astarpo.llm.value import estimate_values

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

    from transformers import AutoModelForCausalLM

    device = resolve_device(cfg.device)
    ref: Any = AutoModelForCausalLM.from_pretrained(ref_path)
    ref = ref.to(device).eval()
    tokenizer = make_char_tokenizer()
    ref_eval = _greedy_accuracy_and_kl(ref, ref, tokenizer, held_out, cfg, 7919)
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
    import astarpo

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
                    "astarpo.llm.bench",
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
    result["summary"] = bench_report.summarize(result)
    bench_report.write(result, out)
    say(f"[bench] wrote {out / 'bench.md'}, {out / 'bench.json'}, {out / 'bench.png'}")
    return result


def _main(argv: list[str]) -> int:
    spec_path, out_path = argv
    result = run_one(json.loads(Path(spec_path).read_text()))
    Path(out_path).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
