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
