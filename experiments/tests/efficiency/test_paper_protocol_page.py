"""docs/baselines.md's "What holds" rows of the paper's protocol, checked against the committed
runs: each run's summary is made again from its runs, and every cell's number, direction and
verdict (bold: the interval excludes no effect and the Holm-adjusted p is below 0.05) must be
the one the page's rule gives."""

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from experiments.efficiency.report import refresh

pytestmark = pytest.mark.pages

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "baselines.md"

# (committed run, the start of its row on the page, the time measure the row reads)
ROWS = [
    ("paper_protocol.json", "| same, 600 steps, rates swept at 600 (the full run)", "cpu_time"),
    ("paper_1000.json", "| same, 1,000 steps, rates swept at 1,000", "cpu_time"),
    ("paper_addition.json", "| **paper's protocol, addition task**", "cpu_time"),
]
VS = ("grpo", "rloo", "ppo", "rebel")


def _row(start: str) -> list[str]:
    lines = [line for line in PAGE.read_text().splitlines() if line.startswith(start)]
    assert len(lines) == 1, f"one row starting {start!r} expected on the page"
    cells = [c.strip() for c in lines[0].strip("|").split("|")]
    return cells[1:]


def _check(part: str, value: float, low: float, high: float, holm: float, null: float) -> None:
    shown = float(re.findall(r"[-+]?\d+\.\d+", part)[-1])
    digits = len(re.findall(r"\d+\.(\d+)", part)[-1])
    assert math.isclose(shown, value, abs_tol=0.51 * 10**-digits), (part, value)
    excludes = high < null or low > null
    verdict = excludes and holm < 0.05
    assert part.startswith("**") == verdict, (part, low, high, holm)
    if not verdict:
        assert "no difference" in part, part
        assert ("after Holm" in part) == excludes, (part, low, high, holm)
    for word, below in (("lower", True), ("higher", False)):
        if word in part:
            assert (high < null) == below, (part, low, high)


@pytest.mark.parametrize(("name", "start", "time"), ROWS)
def test_the_paper_protocol_rows_follow_from_the_runs(name: str, start: str, time: str) -> None:
    committed: dict[str, Any] = json.loads((ROOT / "docs" / "figures" / name).read_text())
    paper = committed["summary"]["paper"]
    remade = refresh(json.loads(json.dumps(committed)))["summary"]["paper"]
    for algo in VS:
        old = paper["differences"][algo]["expected_accuracy"]["diff"]
        assert remade["differences"][algo]["expected_accuracy"]["diff"] == pytest.approx(old)
        assert remade["ratios"][algo][time]["ratio"] == pytest.approx(
            paper["ratios"][algo][time]["ratio"]
        )
    cells = _row(start)
    assert len(cells) == len(VS)
    for algo, cell in zip(VS, cells, strict=True):
        time_part, acc_part = cell.split(" / ")
        r = remade["ratios"][algo][time]
        _check(time_part, r["ratio"], r["low"], r["high"], remade["holm"][f"{algo}/{time}"], 1.0)
        d = remade["differences"][algo]["expected_accuracy"]
        holm = remade["holm"][f"{algo}/expected_accuracy"]
        _check(acc_part, d["diff"], d["low"], d["high"], holm, 0.0)
