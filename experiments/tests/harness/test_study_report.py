"""The shared report: formatting, standard JSON, the three files, the clock's lines."""

from __future__ import annotations

import json
import math

from experiments.harness.output import OutputDir
from experiments.harness.report import (
    fmt,
    fmt_ci,
    fmt_ratio,
    process_lines,
    table,
    write,
)


def test_formatting():
    assert fmt(0.123456) == "0.123" and fmt(None) == "n/a" and fmt(math.nan) == "n/a"
    assert fmt_ci({"mean": 0.5, "low": 0.25, "high": 0.75}) == "0.5 [0.25, 0.75]"
    assert fmt_ci({"mean": 0.5, "low": None, "high": None}) == "0.5"  # one seed, after JSON
    r = {"ratio": 0.5, "low": 0.4, "high": 0.6, "pairs": 2, "missing": 1}
    assert fmt_ratio(r) == "0.50 [0.40, 0.60] (2/3 pairs)"
    assert fmt_ratio({**r, "missing": 0, "low": math.nan}) == "0.50"
    assert fmt_ratio({**r, "pairs": 0}) == "n/a (0/1 pairs)"
    assert table(["a", "b"], [[1, "x"]]) == ["| a | b |", "|---|---|", "| 1 | x |"]


def test_write_is_standard_json_and_records_its_files(tmp_path):
    out = OutputDir(tmp_path, "s")
    result = {"x": [1.0, math.nan, math.inf], "y": {"z": (math.nan,)}}
    write(out, result, "# s\n", lambda res, path: path.write_bytes(b"png"))
    assert json.loads((tmp_path / "s.json").read_text()) == {
        "x": [1.0, None, None],
        "y": {"z": [None]},
    }
    assert (tmp_path / "s.md").read_text() == "# s\n" and (tmp_path / "s.png").read_bytes()
    assert set(out.recorded()) == {"s.json", "s.md", "s.png"}
    write(out, {"x": 2}, "# t\n", lambda res, path: None, with_json=False)
    assert json.loads((tmp_path / "s.json").read_text())["x"][0] == 1.0  # not rewritten


def test_process_lines_count_the_slow_runs():
    runs = [{"process": {"slow": True}}, {"process": {"slow": False}}]
    res = {"wall_s": 12.3, "load": {"start": [1, 1, 1], "end": [2, 2, 2], "warning": "busy"}}
    text = "\n".join(process_lines({**res, "runs": runs, "slow_runs": 1}))
    assert "12 s" in text and "1 of 2 runs had CPU/wall below 0.9" in text
    assert "Warning at the start: busy." in text and "read back" not in text
    text = "\n".join(process_lines({**res, "runs": runs, "resumed_runs": 2}))
    assert "2 runs were read back from an earlier, interrupted run" in text
    assert process_lines({}) == []
