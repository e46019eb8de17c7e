"""The paths of a benchmark's run specs: absolute, whatever ``out_dir`` was given, because a
worker starts in its own run directory; a relative path in a spec is refused at once."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from astarpo.llm.bench import runner as runner_mod
from astarpo.llm.bench import worker, zero_pass_run
from astarpo.llm.bench.config import BenchConfig


def _result(lr: float) -> dict:
    ev = {"time": 1.0, "expected_accuracy": 0.5, "accuracy": 0.5, "kl": 0.0}
    return {"lr": lr, "steps": 1, "clock_s": 1.0, "stage1_s": 0.0, "evals": [ev]}


def test_the_spec_of_a_relative_out_dir_holds_absolute_paths(tmp_path, monkeypatch):
    """``--out runs/bench`` (the default) is relative: every path of the spec the runner writes
    names, from the run directory the worker starts in, what it named in the parent."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rel" / "bench" / "reference").mkdir(parents=True)
    (tmp_path / "rel" / "bench" / "values.jsonl").write_text("")
    cfg = BenchConfig(out_dir="rel/bench", cache_dir="cache", algos=("astarpo",))
    seen: dict = {}

    def fake_run(cmd, env, cwd):
        os.chdir(cwd)  # where the worker runs
        spec = json.loads(Path("spec.json").read_text())
        seen["spec"] = spec
        seen["resolves"] = {k: Path(spec[k]).exists() for k in ("reference", "out", "values")}
        Path("result.json").write_text(json.dumps(_result(spec["lr"])))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(runner_mod.subprocess, "run", fake_run)
    runner = runner_mod.Runner(cfg, Path("rel/bench/reference"), [], lambda *a: None)
    runner_mod.sweep_score(runner, "astarpo", 1e-3, [], Path("rel/bench/values.jsonl"))
    spec = seen["spec"]
    for key in ("reference", "out", "values"):
        assert Path(spec[key]).is_absolute(), (key, spec[key])
    assert seen["resolves"] == {"reference": True, "out": True, "values": True}
    assert spec["reference"] == str(tmp_path / "rel" / "bench" / "reference")
    assert spec["out"] == str(tmp_path / "rel" / "bench" / "runs" / "sweep-astarpo-lr0.001")
    assert spec["config"]["out_dir"] == str(tmp_path / "rel" / "bench")
    assert spec["config"]["cache_dir"] == str(tmp_path / "cache")


def test_a_worker_given_a_relative_model_path_refuses_at_once(monkeypatch):
    def no_load(*args, **kwargs):
        raise AssertionError("the reference must not be loaded")

    monkeypatch.setattr(worker, "load_pretrained_model", no_load)
    monkeypatch.setattr(zero_pass_run, "load_pretrained_model", no_load)
    spec = {"config": BenchConfig().__dict__, "reference": "bench/reference", "out": "/tmp/r"}
    with pytest.raises(ValueError, match=r"relative paths reference='bench/reference'"):
        worker.run_one({**spec, "arm": "grpo", "seed": 0})
    spec = {**spec, "values": "v.jsonl", "check_values": "/v.jsonl", "arm": "grpo", "seed": 0}
    with pytest.raises(ValueError, match=r"reference='bench/reference', values='v.jsonl'"):
        zero_pass_run.run_one({**spec, "set": "hard", "lr": 1e-3})
