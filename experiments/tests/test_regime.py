"""The regime ladder's readings on planted cells with a known answer: the gap by size, equal
sequences, Holm's family, and the rule of docs/regimes.md decided each way."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from experiments.regime import report, summary

SEEDS = range(5)
SAMPLES = {"astarpo": 1, "grpo": 8, "ppo": 1}


def _run(algo: str, seed: int, accuracy: float, kl: float = 1.0, clock: float = 10.0) -> dict:
    evals = [{"expected_accuracy": 0.4, "accuracy": 0.5, "kl": 0.0, "cpu_time": 0.0, "step": 0}]
    evals.append(
        {"expected_accuracy": accuracy, "accuracy": 0.9, "kl": kl, "cpu_time": clock, "step": 240}
    )
    return {
        "algo": algo,
        "seed": seed,
        "lr": 1e-4,
        "steps": 240,
        "clock_s": clock,
        "samples_per_prompt": SAMPLES[algo],
        "wall_seconds": clock + 1,
        "cpu_seconds": clock + 1,
        "evals": evals,
    }


def _cell(batch: int, runs: list[dict]) -> dict:
    return {
        "cell": f"b{batch}",
        "config": {"protocol": "paper", "batch_size": batch},
        "sweep": {r["algo"]: {"chosen": 1e-4} for r in runs},
        "wall_s": 1.0,
        "runs": runs,
    }


def _ladder(gap16: float, gap64: float) -> list[dict]:
    """A*-PO and GRPO at 16 and 64 prompts per step (A*-PO also at 128 = GRPO at 16's
    sequences), A*-PO behind GRPO by ``gap`` on average with seed noise of +-0.01."""
    noise = [0.01, -0.01, 0.005, -0.005, 0.0]
    cells = []
    for b, gap in ((16, gap16), (64, gap64)):
        runs = [_run("grpo", s, 0.8, kl=1.2, clock=40.0) for s in SEEDS]
        runs += [_run("astarpo", s, 0.8 - gap + noise[s], kl=0.9, clock=10.0) for s in SEEDS]
        cells.append(_cell(b, runs))
    cells.append(_cell(128, [_run("astarpo", s, 0.79 + noise[s], clock=20.0) for s in SEEDS]))
    return cells


def test_rows_carry_every_field_the_ladder_json_needs() -> None:
    rows = summary.run_rows(_ladder(0.2, 0.05))
    assert len(rows) == 25
    row = next(r for r in rows if r["algo"] == "grpo" and r["prompts_per_step"] == 64)
    assert row["sequences_per_step"] == 512 and row["steps"] == 240 and row["lr"] == 1e-4
    assert row["accuracy"] == 0.8 and row["kl"] == 1.2 and row["time"] == 40.0
    assert not math.isnan(row["cpu_time"]) and row["cell"] == "b64"


@pytest.mark.parametrize(
    ("gap64", "verdict"),
    [(0.0, "the regime"), (0.02, "the regime"), (0.2, "the method"), (0.06, "in between")],
)
def test_the_rule_decides_at_the_largest_size_both_ran(gap64: float, verdict: str) -> None:
    result = summary.summarize(_ladder(0.2, gap64))
    assert result["rule"]["size"] == 64 and result["rule"]["verdict"] == verdict
    assert result["gaps"]["16"]["accuracy"]["diff"] == pytest.approx(-0.2)
    assert result["gaps"]["64"]["accuracy"]["diff"] == pytest.approx(-gap64)
    assert result["gaps"]["64"]["kl"]["diff"] == pytest.approx(-0.3)


def test_a_wide_interval_is_not_the_method() -> None:
    cells = _ladder(0.2, 0.2)
    for r in cells[1]["runs"]:
        if r["algo"] == "astarpo" and r["seed"] == 0:
            r["evals"][-1]["expected_accuracy"] = 1.0  # one seed far off: the interval reaches 0
    rule = summary.summarize(cells)["rule"]
    assert rule["d"]["diff"] <= summary.METHOD and rule["d"]["high"] >= summary.REGIME
    assert rule["verdict"] == "in between"


def test_equal_sequences_pairs_astarpo_at_8b_with_grpo_at_b() -> None:
    (pair,) = summary.summarize(_ladder(0.2, 0.05))["equal_sequences"]
    assert (pair["peer_prompts_per_step"], pair["astarpo_prompts_per_step"]) == (16, 128)
    assert pair["accuracy"]["diff"] == pytest.approx(-0.01)
    assert pair["time"]["ratio"] == pytest.approx(0.5) and pair["accuracy"]["pairs"] == 5


def test_holm_covers_every_peer_at_every_size_both_ran() -> None:
    cells = _ladder(0.2, 0.05)
    cells[0]["runs"] += [_run("ppo", s, 0.7) for s in SEEDS]
    diffs = summary.summarize(cells)["differences"]
    assert set(diffs) == {"grpo@16", "grpo@64", "ppo@16"}
    assert all(d["holm_p"] >= d["p"] for d in diffs.values())


def test_cells_are_read_from_their_folders_and_refused_when_unfinished(tmp_path: Path) -> None:
    for cell in _ladder(0.2, 0.05):
        (tmp_path / cell["cell"]).mkdir()
        (tmp_path / cell["cell"] / "bench.json").write_text(json.dumps(cell))
    cells = summary.load_cells(sorted(tmp_path.iterdir()))
    assert [c["cell"] for c in cells] == ["b128", "b16", "b64"]
    (tmp_path / "b32").mkdir()
    with pytest.raises(ValueError, match=r"b32: no bench\.json"):
        summary.load_cells([tmp_path / "b32"])
    clock = {**cells[0], "config": {"protocol": "clock", "batch_size": 16}}
    (tmp_path / "b32" / "bench.json").write_text(json.dumps(clock))
    with pytest.raises(ValueError, match="not a paper-protocol study"):
        summary.load_cells([tmp_path / "b32"])


def test_the_report_writes_its_three_files(tmp_path: Path) -> None:
    result = report.build(_ladder(0.2, 0.05))
    report.write(result, tmp_path)
    text = (tmp_path / "regime.md").read_text()
    assert "At B* = 64" in text and "**in between**" in text
    assert json.loads((tmp_path / "regime.json").read_text())["rule"]["size"] == 64
    assert (tmp_path / "regime.png").stat().st_size > 10_000
