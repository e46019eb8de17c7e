"""The efficiency benchmark: A*-PO against the baselines on one wall-clock protocol.

:func:`run_bench` does, in one invocation:

1. the reference: the toy model fine-tuned briefly on the addition task by
   :func:`~astarpo.llm.toy.sft.cached_sft` (cached) so that it starts weak, saved under
   ``out_dir/reference``; the splits (training pool, held-out, validation) are fixed, so every
   run sees the same pool in the same order for its seed;
2. the hard subset: the held-out problems that the reference never solves in N samples
   (pass@N = 0, measured as Stage 1 measures the pool);
3. Stage 1 once on the pool (its time alone; the table the sweep reuses);
4. the learning-rate sweep (``lr_grid``) on a separate seed and a validation split, every
   algorithm scored by :func:`~astarpo.llm.bench.stats.curve_area` and its learning rate
   chosen by :func:`~astarpo.llm.bench.stats.select_lr`;
5. for every seed and run (:func:`~astarpo.llm.bench.config.arms`, the peers of
   :mod:`astarpo.llm.bench.peers` included), one training run in a fresh process
   (:mod:`astarpo.llm.bench.worker`) with the same wall-clock budget, A*-PO's Stage 1 (and
   TRL A2PO's) inside it;
6. with ``one_pass``, A*-PO and GRPO again on a pool that no run goes through twice
   (:mod:`astarpo.llm.bench.one_pass`), after the main runs' report is written;
7. the summary (:mod:`astarpo.llm.bench.report`): ``bench.json``, ``bench.md``, ``bench.png``.
"""

from __future__ import annotations

import importlib.util
import os
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch

from astarpo.llm.bench import report
from astarpo.llm.bench.config import BenchConfig, arms
from astarpo.llm.bench.manifest import clear_output, record
from astarpo.llm.bench.measure import evaluate_policy
from astarpo.llm.bench.one_pass import ONE_PASS_ARMS, one_pass_pool_size
from astarpo.llm.bench.peers import check_peers, peer_info
from astarpo.llm.bench.runner import Runner, seed_runs, sweep
from astarpo.llm.bench.worker import stage1
from astarpo.llm.models.loading import load_pretrained_model
from astarpo.llm.models.toy import make_char_tokenizer, make_toy_model
from astarpo.llm.parallel.dist import resolve_device
from astarpo.llm.toy.sft import SFTConfig, cached_sft
from astarpo.llm.toy.tasks import get_task

__all__ = ["check_backend", "run_bench", "splits"]

#: The problems of the task (zero-padded 2-digit addition, or the scratchpad's 4-digit worked
#: solutions), drawn once. The first 1000 are the held-out
#: region (held-out rows first, validation rows from 500, whose first ``REF_CHECK`` rows are
#: also the reference's stopping check, whatever ``val_size``), the next 8000 the SFT data,
#: whose first ``pool_size`` rows are the training pool. Pinned so a result stays reproducible.
REF_SEED, REF_HELD, REF_SFT, VAL_START, REF_CHECK = 0, 1000, 8000, 500, 200
REF_SFT_BATCH = 64


def splits(cfg: BenchConfig) -> dict[str, list[dict[str, str]]]:
    """``{"sft", "pool", "held_out", "val", "check"}`` rows (disjoint but for the pool within
    ``sft`` and ``check``, the reference's stopping check, overlapping ``val``).

    Raises:
        ValueError: ``pool_size``, ``eval_size`` or ``val_size`` exceeds its region.
    """
    if cfg.pool_size > REF_SFT or cfg.eval_size > VAL_START or cfg.val_size > REF_HELD - VAL_START:
        raise ValueError(
            f"pool_size <= {REF_SFT}, eval_size <= {VAL_START} and val_size <= "
            f"{REF_HELD - VAL_START} are required."
        )
    problems = get_task(cfg.task).rows(REF_HELD + REF_SFT, REF_SEED)
    sft_rows = problems[REF_HELD:]
    return {
        "sft": sft_rows,
        "pool": sft_rows[: cfg.pool_size],
        "held_out": problems[: cfg.eval_size],
        "val": problems[VAL_START : VAL_START + cfg.val_size],
        "check": problems[VAL_START : VAL_START + REF_CHECK],
    }


def _reference(
    cfg: BenchConfig, rows: dict[str, list[dict[str, str]]], out: Path
) -> tuple[Path, Any]:
    """Fine-tune (or load from the SFT cache) the reference until its expected accuracy on the
    check rows (validation region) reaches ``reference_target``; saved to ``out/reference``."""
    tokenizer = make_char_tokenizer()
    shape = {**get_task(cfg.task).model, **cfg.model_overrides}
    model = make_toy_model(tokenizer, seed=REF_SEED, **shape)
    model = model.to(resolve_device(cfg.device))  # SFT on the benchmark's device
    sft_cfg = SFTConfig(
        cfg.sft_steps, REF_SFT_BATCH, cfg.sft_lr, target_accuracy=cfg.reference_target
    )
    model, info = cached_sft(
        model, tokenizer, rows["sft"], sft_cfg, cfg.cache_dir, False, check_rows=rows["check"]
    )
    path = out / "reference"
    record(out, "reference")
    model.save_pretrained(path)
    return path, info


def check_backend(backend: str) -> None:
    """Refuse ``backend="vllm"`` without vLLM before any work.

    Raises:
        RuntimeError: vLLM is not installed (the message says how to install it).
    """
    if backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise RuntimeError(
            "--backend vllm needs vLLM, which is not installed in this environment; install "
            "the vllm extra (`make vllm-install` builds .venv-vllm) or use --backend hf."
        )


def _one_pass(
    cfg: BenchConfig,
    runs: list[dict[str, Any]],
    lrs: dict[str, Any],
    held_out: list[dict[str, str]],
    hard: list[bool],
    reference: Path,
    say: Any,
) -> dict[str, Any]:
    """The one-pass runs (:mod:`astarpo.llm.bench.one_pass`): A*-PO and GRPO again, same seeds
    and learning rates, on a pool sized from the main ``runs`` so that none revisits a prompt.
    Returns ``{"sizing", "config", "runs"}`` (the summary is added by :func:`run_bench`)."""
    sizing = one_pass_pool_size(runs, cfg.max_train_seconds, cfg.batch_size, limit=REF_SFT)
    wide = replace(cfg, pool_size=sizing["pool_size"])
    say(f"[bench] one pass: pool of {wide.pool_size} prompts ({sizing['need']})")
    runner = Runner(wide, reference, splits(wide)["pool"], say)
    names = tuple(a for a in ONE_PASS_ARMS if a in cfg.algos)
    out = seed_runs(runner, names, lrs, held_out, hard, prefix="onepass-")
    return {"sizing": sizing, "config": {**asdict(wide), "algos": names}, "runs": out}


def _finish(result: dict[str, Any], t_start: float, load_start: Any, out: Path) -> None:
    """Stamp the wall time and load on ``result`` and write ``bench.json/md/png``."""
    result["wall_s"] = time.perf_counter() - t_start
    result["load"] = {"start": load_start, "end": _load()}
    report.write(result, out)


def _load() -> list[float] | None:
    """The 1/5/15-minute load averages (timings on a shared machine depend on them)."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def run_bench(cfg: BenchConfig, progress: bool = True, overwrite: bool = False) -> dict[str, Any]:
    """Run the whole benchmark (see the module doc) and write ``bench.json/md/png``.

    Args:
        cfg: The protocol.
        progress: Print a line per phase and per run.
        overwrite: Delete an earlier benchmark in ``cfg.out_dir`` first, exactly the paths
            its manifest lists (:func:`~astarpo.llm.bench.manifest.clear_output`); without it
            such a directory is refused before any work, and so is one holding files no
            benchmark manifest lists.

    Returns:
        The content of ``bench.json``: ``{"config", "reference", "hard", "stage1", "sweep",
        "runs", "peers", "summary", "wall_s", "load"}`` (``peers``: per peer library its
        version and the settings that differ from ours, :func:`~astarpo.llm.bench.peers.peer_info`).

    Raises:
        RuntimeError: a peer of ``cfg.peers`` is not installed (before any run).
    """
    check_peers(cfg.peers)
    check_backend(cfg.backend)
    t_start, load_start = time.perf_counter(), _load()
    out = Path(cfg.out_dir)
    clear_output(out, overwrite)
    out.mkdir(parents=True, exist_ok=True)
    say = print if progress else (lambda *a, **k: None)
    torch.set_num_threads(cfg.threads)
    rows = splits(cfg)
    say(f"[bench] reference (SFT to {cfg.reference_target} on validation, cached)")
    ref_path, sft_info = _reference(cfg, rows, out)
    say(
        f"[bench] reference: {sft_info['steps']} SFT steps, validation "
        f"{sft_info['check_accuracy']:.3f} -> {out / 'reference'}"
    )
    ref: Any = load_pretrained_model(ref_path)
    ref = ref.to(resolve_device(cfg.device)).eval()
    tok = make_char_tokenizer()
    for name in ("held_out_pass.jsonl", "values.jsonl", "bench.json", "bench.md", "bench.png"):
        record(out, name)
    held, _ = stage1(ref, tok, rows["held_out"], cfg, out / "held_out_pass.jsonl", seed=1)
    by_prompt = {r.prompt: r.pass_rate for r in held}
    hard = [by_prompt[r["prompt"]] == 0 for r in rows["held_out"]]
    ref_eval = evaluate_policy(ref, ref, tok, rows["held_out"], cfg, 7919, hard)
    say(f"[bench] reference held-out: {ref_eval}; hard subset {sum(hard)}/{len(hard)}")
    table, stage1_s = stage1(ref, tok, rows["pool"], cfg, out / "values.jsonl", seed=0)
    all_wrong = sum(r.pass_rate == 0 for r in table)
    say(f"[bench] Stage 1 alone: {stage1_s:.1f}s, {all_wrong}/{len(table)} pool prompts all wrong")
    del ref
    runner = Runner(cfg, ref_path, rows["pool"], say)
    lrs = sweep(runner, rows["val"], out / "values.jsonl")
    lrs["astarpo_drop"] = lrs["astarpo"]
    runs = seed_runs(runner, arms(cfg), lrs, rows["held_out"], hard)
    result: dict[str, Any] = {
        "config": asdict(cfg),
        "reference": {**ref_eval, "sft": sft_info},
        "hard": {"held_out": sum(hard), "of": len(hard), "n_samples": cfg.n_samples},
        "stage1": {"seconds": stage1_s, "prompts": len(table), "all_wrong": all_wrong},
        "sweep": lrs,
        "runs": runs,
        "peers": {p: peer_info(cfg) for p in cfg.peers},
    }
    result["summary"] = report.summarize(result)
    _finish(result, t_start, load_start, out)
    if cfg.one_pass:
        # The main runs' report is on disk first: a failed one-pass run loses none of it.
        say(f"[bench] main runs written to {out / 'bench.json'}; now the one-pass setting")
        try:
            one_pass = _one_pass(cfg, runs, lrs, rows["held_out"], hard, ref_path, say)
        except RuntimeError as e:
            say(f"[bench] the one-pass setting failed; the main runs' report stands: {e}")
            result["one_pass_error"] = str(e)
        else:
            mini = {**result, "config": one_pass["config"], "runs": one_pass["runs"]}
            one_pass["summary"] = report.summarize(mini, targets=result["summary"]["targets"])
            result["one_pass"] = one_pass
        _finish(result, t_start, load_start, out)
    say(f"[bench] wrote {out / 'bench.md'}, {out / 'bench.json'}, {out / 'bench.png'}")
    return result
