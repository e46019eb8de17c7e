"""The harness's runner: a run per fresh process on a stated clock (wall and CPU time, the slow
flag, the re-run), specs of absolute paths, the load warning, the seed loop and the sweep."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest

from experiments.harness import runner as runner_mod
from experiments.harness.output import OutputDir
from experiments.harness.runner import Runner, rotated, run_process
from experiments.harness.sweep import extend_grid, select, sweep, sweep_all

BUSY = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"


def test_run_process_measures_the_childs_wall_and_cpu_time():
    code, wall, cpu = run_process([sys.executable, "-c", BUSY])
    assert code == 0 and cpu >= 0.3 and wall >= cpu * 0.5
    code, wall, cpu = run_process([sys.executable, "-c", "import time; time.sleep(0.4)"])
    assert code == 0 and wall >= 0.4 and cpu < wall  # sleeping costs no CPU: a low ratio
    assert run_process([sys.executable, "-c", "raise SystemExit(3)"])[0] == 3


def echo(spec: dict) -> dict:
    """An entry point for the tests: the spec back, and where the process ran."""
    return {"spec": spec, "cwd": os.getcwd(), "steps": 1}


def _runner(tmp_path, monkeypatch, **kw) -> Runner:
    """A runner whose workers can import this test module (``test_study_runner:echo``)."""
    r = Runner(OutputDir(tmp_path / "out", "t"), say=lambda *a: None, **kw)
    r.env["PYTHONPATH"] += os.pathsep + str(Path(__file__).parent)
    return r


ECHO = {"entry": "test_study_runner:echo"}


def test_a_run_writes_an_absolute_spec_and_records_its_clock(tmp_path, monkeypatch):
    """``--out runs/x`` is relative: every path of the spec the runner writes names, from the
    run folder the worker starts in, what it named in the parent."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ref").mkdir()
    monkeypatch.setattr(runner_mod, "run_process", _in_process)
    runner = Runner(OutputDir("out", "t"), say=lambda *a: None)
    res = runner.run("a", {**ECHO, "reference": "ref", "paths": ["reference"]})
    spec = res["spec"]
    assert spec["reference"] == str(tmp_path / "ref") and Path(spec["out"]).is_absolute()
    assert res["cwd"] == spec["out"] == str(tmp_path / "out" / "runs" / "a")
    assert set(res["process"]) == {"wall_s", "cpu_s", "cpu_wall", "slow"}
    assert "runs/a" in OutputDir(tmp_path / "out", "t").recorded()


def _in_process(cmd, cwd, env):
    """run_process in this process (no child): the worker's main in ``cwd``."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        runner_mod.main(cmd[-2:])
    finally:
        os.chdir(old)
    return 0, 1.0, 0.5  # a wall of 1 s with half a core: slow


def test_a_slow_run_is_flagged_and_rerun_once_on_request(tmp_path, monkeypatch):
    monkeypatch.setattr(runner_mod, "run_process", _in_process)
    spec = ECHO
    res = Runner(OutputDir(tmp_path, "t"), say=lambda *a: None).run("a", spec)
    assert res["process"] == {"wall_s": 1.0, "cpu_s": 0.5, "cpu_wall": 0.5, "slow": True}
    res = Runner(OutputDir(tmp_path, "t"), rerun_slow=True, say=lambda *a: None).run("b", spec)
    assert res["process"]["slow"] and res["process"]["first_attempt"]["cpu_wall"] == 0.5
    # a run whose result does not read the clock: flagged, not run again
    runner = Runner(OutputDir(tmp_path, "t"), rerun_slow=True, say=lambda *a: None)
    (res,) = runner.run_all([("c", spec)], rerun_slow=False)
    assert res["process"]["slow"] and "first_attempt" not in res["process"]


def test_resume_reads_back_finished_runs_and_runs_the_rest(tmp_path, monkeypatch):
    """An interrupted study: a run with its clock in result.json is read back (same spec); one
    whose spec changed, one killed before its clock was written and one never started run."""
    calls = []

    def counted(cmd, cwd, env):
        calls.append(Path(cwd).name)
        return _in_process(cmd, cwd, env)

    monkeypatch.setattr(runner_mod, "run_process", counted)
    out = OutputDir(tmp_path, "t")
    first = Runner(out, say=lambda *a: None)
    done = first.run("a", {**ECHO, "lr": 1e-4})
    first.run("b", {**ECHO, "lr": 1e-4})
    first.run("c", {**ECHO, "lr": None})
    assert json.loads((tmp_path / "runs" / "a" / "result.json").read_text()) == done
    killed = tmp_path / "runs" / "c" / "result.json"  # the worker's result, the clock not added
    killed.write_text(
        json.dumps({k: v for k, v in json.loads(killed.read_text()).items() if k != "process"})
    )
    calls.clear()
    out.clear(overwrite=False, resume=True)
    again = Runner(out, say=lambda *a: None, resume=True)
    res = again.run_all(
        [(n, {**ECHO, "lr": lr}) for n, lr in [("a", 1e-4), ("b", 3e-4), ("c", None), ("d", 1e-4)]]
    )
    assert sorted(calls) == ["b", "c", "d"] and again.resumed == ["a"]
    assert res[0]["process"] == {**done["process"], "resumed": True}
    assert res[0]["spec"] == done["spec"] and res[1]["spec"]["lr"] == 3e-4
    result = {"runs": res}
    again.stamp(result)
    assert result["resumed_runs"] == 1
    calls.clear()  # with --rerun-slow, a slow run the earlier study kept is run again
    Runner(out, say=lambda *a: None, resume=True, rerun_slow=True).run("a", {**ECHO, "lr": 1e-4})
    assert calls == ["a", "a"]  # its due re-run (the fake clock is slow every time)
    calls.clear()  # that re-run is recorded in result.json: read back, not run a third time
    kept = Runner(out, say=lambda *a: None, resume=True, rerun_slow=True)
    res = kept.run("a", {**ECHO, "lr": 1e-4})
    assert calls == [] and res["process"]["first_attempt"]["slow"] and kept.resumed == ["a"]
    # a slow run kept by a study that did not run it again is read back where its result does
    # not read the clock (rerun_slow=False for that run), though the runner runs slow runs again
    Runner(out, say=lambda *a: None).run("e", {**ECHO, "lr": 1e-4})
    calls.clear()
    (res,) = kept.run_all([("e", {**ECHO, "lr": 1e-4})], rerun_slow=False)
    assert calls == [] and res["process"]["resumed"] and "first_attempt" not in res["process"]
    calls.clear()
    calls.clear()  # without resume every run runs again
    Runner(out, say=lambda *a: None).run("a", {**ECHO, "lr": 1e-4})
    assert calls == ["a"]


@pytest.mark.e2e
def test_a_real_run_in_a_fresh_process(tmp_path, monkeypatch):
    runner = _runner(tmp_path, monkeypatch)
    res = runner.run("real", ECHO)
    assert res["cwd"] == str((tmp_path / "out" / "runs" / "real").resolve())
    assert res["process"]["wall_s"] > 0 and res["process"]["cpu_s"] > 0
    assert json.loads((tmp_path / "out" / "runs" / "real" / "spec.json").read_text())["paths"]
    two = runner.run_all([("x", ECHO), ("y", ECHO)])
    assert [r["steps"] for r in two] == [1, 1]


def test_a_failed_run_names_its_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(runner_mod, "run_process", lambda cmd, **kw: (1, 1.0, 1.0))
    with pytest.raises(RuntimeError, match=r"run a failed \(exit code 1\).*runs/a"):
        Runner(OutputDir(tmp_path, "t"), say=lambda *a: None).run("a", {"entry": "x"})


def test_the_load_warning_and_the_stamp(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runner_mod.os, "getloadavg", lambda: (3.0, 2.0, 1.0))
    r = Runner(OutputDir(tmp_path, "t"), threads=1, workers=2)
    assert "load average is 3.0, above the 2 cores" in capsys.readouterr().err
    result = {"runs": [{"process": {"slow": True}}, {"process": {"slow": False}}]}
    r.stamp(result)
    assert result["slow_runs"] == 1 and result["load"]["start"] == [3.0, 2.0, 1.0]
    assert "above the 2 cores" in result["load"]["warning"] and result["wall_s"] >= 0
    assert Runner(OutputDir(tmp_path, "t"), threads=2, workers=2).warning is None


def test_a_worker_refuses_a_relative_path_before_loading(tmp_path):
    spec = {"entry": "nothing:run", "reference": "bench/reference", "paths": ["reference"]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    with pytest.raises(ValueError, match=r"relative paths reference='bench/reference'"):
        runner_mod.main([str(tmp_path / "spec.json"), str(tmp_path / "r.json")])
    (tmp_path / "spec.json").write_text(json.dumps({"entry": "os"}))
    with pytest.raises(ValueError, match="is not 'MODULE:FUNCTION'"):
        runner_mod.main([str(tmp_path / "spec.json"), str(tmp_path / "r.json")])


def test_rotated_seed_loop():
    assert list(rotated(("a", "b", "c"), 2)) == [
        (0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "c"), (1, "a"),
    ]  # fmt: skip


def test_select_and_extend_grid():
    assert select({1e-4: 0.30, 3e-4: 0.52, 1e-3: 0.41}) == 3e-4
    assert select({1e-4: 0.5, 3e-4: 0.5}) == 1e-4  # tie: the smaller
    assert select({1e-4: 0.2, 1e-3: math.nan}) == 1e-4  # a diverged run never wins
    with pytest.raises(ValueError):
        select({})
    assert extend_grid({1e-4: 0.5, 3e-4: 0.4, 1e-3: 0.1}) == pytest.approx(3.33e-5)
    assert extend_grid({1e-4: 0.1, 3e-4: 0.4, 1e-3: 0.5}) == pytest.approx(3.33e-3)
    assert extend_grid({1e-4: 0.1, 3e-4: 0.5, 1e-3: 0.4}) is None  # bracketed
    assert extend_grid({1e-4: 0.1}) is None
    assert extend_grid({1e-4: 0.2, 3e-4: 0.5, 1e-3: math.nan}) is None
    assert extend_grid({16: 0.1, 32: 0.2, 64: 0.3}, integer=True) == 128.0  # a batch size
    assert extend_grid({2: 0.3, 4: 0.2}, integer=True) == 1.0


@pytest.mark.parametrize(
    ("extensions", "added", "still_edge"),
    [(0, [], True), (2, [3.33e-5, 1.11e-5], True), (3, [3.33e-5, 1.11e-5, 3.7e-6], False)],
)
def test_sweep_extends_a_grid_whose_choice_is_an_edge(extensions, added, still_edge):
    """Scores peak at 1e-5, below the grid 1e-4..1e-3: each extension steps one grid ratio
    further down until the choice is bracketed or the extensions run out."""
    tried = []

    def score(lr):
        tried.append(lr)
        return -((math.log10(lr) + 5.0) ** 2)

    result = sweep(score, (1e-4, 3e-4, 1e-3), extensions, say=lambda *a: None)
    assert result["extended"] == pytest.approx(added) and len(tried) == 3 + len(added)
    assert result["chosen"] == pytest.approx(min([1e-4, *added]) if still_edge else 1.11e-5)
    assert sweep(score, (3e-4,))["chosen"] == 3e-4 and len(tried) == 3 + len(added)  # unscored


def test_sweep_all_scores_each_round_in_one_call_and_matches_sweep():
    """Two names, one grid: the grid's six points in one call, then one call per round of
    extensions holding only the names still on an edge; each name's result is :func:`sweep`'s."""
    peak = {"a": -5.0, "b": -3.5}  # a peaks below the grid (two extensions), b inside it
    calls = []

    def score_all(points):
        calls.append(points)
        return [-((math.log10(x) - peak[n]) ** 2) for n, x in points]

    grid = (1e-4, 3e-4, 1e-3)
    got = sweep_all(score_all, ("a", "b"), grid, extensions=2)
    assert [len(c) for c in calls] == [6, 1, 1] and {n for c in calls[1:] for n, _ in c} == {"a"}
    for n in ("a", "b"):
        alone = sweep(lambda x, n=n: score_all([(n, x)])[0], grid, 2, say=lambda *a: None)
        assert got[n] == alone
    assert got["b"]["chosen"] == 3e-4 and got["a"]["extended"] == pytest.approx([3.33e-5, 1.11e-5])
    assert sweep_all(score_all, (), grid) == {} and len(calls) == 3 + 2 * 3 + 2  # no names: none
