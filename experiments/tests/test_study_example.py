"""The worked example of docs/architecture.md ("How to add a study") is complete: its three
modules and its registry line, taken from the page, run as a study (shrunk)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def _blocks() -> dict[str, str]:
    """The page's example: file name (or ``registry``) -> its code."""
    text = DOC.read_text().split("## How to add a study", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    out = {}
    for code in blocks:
        first = code.splitlines()[0]
        name = first.rsplit("/", 1)[-1] if first.startswith("# experiments/") else "registry"
        out[name] = code.replace("experiments.beta2", "beta2_example")
    return out


def test_the_example_is_small_and_whole():
    blocks = _blocks()
    assert set(blocks) == {"config.py", "run.py", "report.py", "registry"}
    assert sum(len(c.splitlines()) for c in blocks.values()) < 300


@pytest.mark.slow
def test_the_example_runs_as_a_study(tmp_path, monkeypatch):
    from experiments.harness.output import OutputDir
    from experiments.registry import Study, StudyCode
    from experiments.tests.lab_setup import TINY

    pkg = tmp_path / "src" / "beta2_example"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    blocks = _blocks()
    for name in ("config.py", "run.py", "report.py"):
        (pkg / name).write_text("from __future__ import annotations\n" + blocks[name])
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "src"))  # the runs' processes import it too
    from beta2_example import config

    names = {"Study": Study, "StudyCode": StudyCode, "beta2": config, "STUDIES": {}}
    names["Beta2Config"] = config.Beta2Config
    exec("from __future__ import annotations\n" + blocks["registry"], names)
    study = names["STUDIES"]["beta2"]
    assert isinstance(study, Study) and study.summary.startswith("A*-PO")
    small = dict(max_train_seconds=2.0, sft_steps=1, model_overrides=TINY, batch_size=2)
    small.update(pool_size=4, eval_size=4, n_samples=2, cache_dir=str(tmp_path / "cache"))
    given = {**config.presets({}, quick=True), **small, "beta2s": (1e-3, 1e-1)}
    cfg = config.Beta2Config.from_dict(given)
    res = study.run(cfg, tmp_path / "out", progress=False)
    assert {r["beta2"] for r in res["runs"]} == {1e-3, 1e-1} and len(res["runs"]) == 2
    assert all(r["process"]["cpu_s"] > 0 for r in res["runs"])
    assert set(res["summary"]) == {"0.001", "0.1"}
    saved = json.loads((tmp_path / "out" / "beta2.json").read_text())
    assert saved["summary"]["0.1"]["n"] == 1 and (tmp_path / "out" / "beta2.png").exists()
    study.rerender(OutputDir(tmp_path / "out", "beta2"))
    assert "| 0.001 |" in (tmp_path / "out" / "beta2.md").read_text()
    del sys.modules["beta2_example"]
