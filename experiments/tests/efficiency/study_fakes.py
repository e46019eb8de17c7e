"""Synthetic runs of the efficiency study, with known answers (shared by its tests)."""

from __future__ import annotations

from experiments.efficiency.config import EfficiencyConfig


def fake_run(arm, seed, times, accs, stage1=0.0, mem=10.0, hard=None, spp=1):
    """A run's result: ``accs`` at ``times`` on its clock, 10 steps of 1 s generation and 2 s
    update, a pool of 100."""
    evals = []
    for i, (t, a) in enumerate(zip(times, accs, strict=True)):
        e = {"step": i, "time": t, "stage2_time": t - stage1, "expected_accuracy": a}
        e.update(accuracy=a, sampled_accuracy=a, kl=0.1 * i)
        if hard is not None:
            e.update(hard_accuracy=hard[i], hard_expected_accuracy=hard[i])
        evals.append(e)
    return {
        "arm": arm,
        "algo": "astarpo" if arm.startswith("astarpo") else arm,
        "seed": seed,
        "lr": 1e-3,
        "evals": evals,
        "stage1_s": stage1,
        "train_s": times[-1] - stage1,
        "clock_s": times[-1],
        "steps": 10,
        "prompts": 320,
        "pool": 100,
        "pool_all_wrong": 3,
        "samples_per_prompt": spp,
        "phases": {"stage1": stage1, "generate": 1.0, "update": 2.0},
        "memory": {"rss_before_train_mb": 100.0, "rss_peak_mb": 100.0 + mem},
    }


def fake_result():
    """Reference 0.2, best final 0.6 (A*-PO): targets 25% = 0.3, 50% = 0.4, 75% = 0.5."""
    runs = [
        fake_run("astarpo", 0, [5.0, 15.0, 25.0], [0.2, 0.4, 0.6], stage1=5.0, hard=[0, 0, 0.1]),
        fake_run("astarpo", 1, [5.0, 15.0, 25.0], [0.2, 0.4, 0.6], stage1=5.0, hard=[0, 0, 0.3]),
        fake_run("grpo", 0, [0.0, 10.0, 20.0], [0.2, 0.3, 0.4], mem=20.0, spp=8),
        fake_run("grpo", 1, [0.0, 10.0, 20.0], [0.2, 0.25, 0.3], mem=20.0, spp=8),
    ]
    cfg = {**EfficiencyConfig().to_dict(), "max_train_seconds": 25.0, "seeds": 2}
    return {
        "config": cfg,
        "reference": {"expected_accuracy": 0.2, "sampled_accuracy": 0.2, "accuracy": 0.2},
        "hard": {"held_out": 7, "of": 50, "n_samples": 8},
        "stage1": {"seconds": 5.0, "prompts": 100, "all_wrong": 3},
        "sweep": {"astarpo": {"scores": {"0.001": 0.4}, "chosen": 1e-3}},
        "runs": runs,
    }


def run_spec(tmp_path, tiny_model, arm, seconds, stage1_inside=True, **config):
    """A worker spec of one run on the tiny reference (saved under ``tmp_path/ref``): 8 training
    and 4 held-out addition rows; ``config`` over the small protocol's fields."""
    from astarpo.llm import addition_task

    ref_path = tmp_path / "ref"
    tiny_model.save_pretrained(ref_path)
    rows = addition_task(12, seed=0)
    small = dict(eval_every_seconds=0.5, batch_size=2, max_new_tokens=3, n_samples=2, eval_size=4)
    cfg = EfficiencyConfig.from_dict(dict(max_train_seconds=seconds, **{**small, **config}))
    return {
        "arm": arm,
        "seed": 0,
        "lr": 1e-3,
        "seconds": seconds,
        "steps": cfg.train.max_steps,
        "stage1_inside": stage1_inside,
        "config": cfg.to_dict(),
        "reference": str(ref_path),
        "train": rows[:8],
        "eval": rows[8:],
        "hard": [True, False, False, True],
        "out": str(tmp_path / "run"),
    }
