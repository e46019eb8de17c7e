"""The quick CPU demo end to end (the README's main command, smaller)."""

from __future__ import annotations

import json

import pytest

from astarpo.cli import main


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_quick_demo_improves_heldout_accuracy_over_reference(tmp_path, capsys):
    out = tmp_path / "demo"
    rc = main(["demo", "--quick", "--out", str(out), "--cache-dir", str(tmp_path / "cache"),
               "--no-progress"])  # fmt: skip
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    ref, final = report["reference"], report["final"]
    assert ref["step"] == 0 and final["step"] == report["train"]["steps"]
    # Held-out problems are disjoint from SFT and RL prompts; 400 problems x 2 samples, so a
    # gain of 0.05 is several standard errors.
    assert final["sampled_pass@1"] > ref["sampled_pass@1"] + 0.05, report["curve"]
    assert final["greedy_pass@1"] >= ref["greedy_pass@1"] - 0.02, report["curve"]
    assert report["sft"]["cached"] is False
    assert (out / "accuracy_vs_time.png").stat().st_size > 1000
    md = (out / "report.md").read_text()
    assert "| step |" in md and md in capsys.readouterr().out
    assert (out / "v_star.jsonl").exists() and (out / "train" / "metrics.jsonl").exists()


def test_demo_task_settings_come_from_the_task(monkeypatch, tmp_path):
    """``--task scratchpad`` gives the task's budget, model shape, reward and SFT target; an
    unknown task and a test set overlapping SFT's check rows are refused."""
    from astarpo.llm.toy import demo as demo_mod
    from astarpo.llm.toy.demo import CHECK, HELDOUT_POOL, REFERENCE_TARGET, DemoConfig
    from astarpo.llm.toy.tasks import get_task

    cfg = DemoConfig.make(quick=True, task="scratchpad")
    spec = get_task("scratchpad")
    assert cfg.task == "scratchpad" and cfg.train.max_new_tokens == spec.max_new_tokens == 78
    assert cfg.model == spec.model and cfg.sft.target_accuracy == REFERENCE_TARGET
    assert cfg.sft.learning_rate == spec.sft_lr
    assert DemoConfig.make(task="scratchpad").n_test == HELDOUT_POOL - CHECK
    plain = DemoConfig.make(quick=True)
    assert plain.task == "addition" and plain.sft.target_accuracy is None
    assert plain.train.max_new_tokens == 5 and plain.model == {}
    with pytest.raises(ValueError, match="unknown task 'subtraction'"):
        DemoConfig.make(task="subtraction")
    with pytest.raises(ValueError, match="n_test must be <= 800"):
        DemoConfig(**{**cfg.__dict__, "n_test": 900})

    seen = {}

    def fake_run(out, quick, cfg):
        seen["cfg"], seen["quick"] = cfg, quick
        (tmp_path / "report.md").write_text("| step |\n")
        return {}

    monkeypatch.setattr(
        demo_mod, "_run_demo", lambda out, quick, cache, progress, cfg: fake_run(out, quick, cfg)
    )
    assert main(["demo", "--quick", "--task", "scratchpad2", "--out", str(tmp_path)]) == 0
    assert seen["cfg"].task == "scratchpad2" and seen["quick"]
    assert seen["cfg"].train.max_new_tokens == get_task("scratchpad2").max_new_tokens
