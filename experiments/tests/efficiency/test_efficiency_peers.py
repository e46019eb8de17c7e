"""The efficiency study's peers (``--peers trl``) without TRL: the config, the missing-TRL error
raised before any run, the clock callback on a simulated loop, and the report on synthetic peer
runs."""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest
from study_fakes import fake_result, fake_run

from experiments.efficiency import peers
from experiments.efficiency.config import EfficiencyConfig, arms, peer_arms
from experiments.efficiency.report import to_markdown
from experiments.efficiency.summary import summarize


def test_peers_config_validation_and_arms():
    with pytest.raises(ValueError, match="peers must be a tuple drawn from"):
        EfficiencyConfig.from_dict(dict(peers=("openrlhf",)))
    with pytest.raises(ValueError, match="peers must be a tuple"):
        replace(EfficiencyConfig(), peers=["trl"])  # a list: from_dict would make it a tuple
    with pytest.raises(ValueError, match="twice"):
        EfficiencyConfig.from_dict(dict(peers=("trl", "trl")))
    cfg = EfficiencyConfig.from_dict(dict(algos=("astarpo", "grpo"), peers=("trl",)))
    assert peer_arms(cfg) == ("trl_grpo", "trl_a2po")
    assert arms(cfg) == ("astarpo", "grpo", "astarpo_drop", "trl_grpo", "trl_a2po")
    assert arms(EfficiencyConfig.from_dict(dict(algos=("astarpo",)))) == ("astarpo", "astarpo_drop")


def test_missing_trl_fails_before_any_run(monkeypatch, tmp_path):
    import experiments.efficiency.run as run_mod

    real = peers.importlib.util.find_spec
    monkeypatch.setattr(
        peers.importlib.util, "find_spec", lambda n, *a: None if n == "trl" else real(n, *a)
    )
    with pytest.raises(RuntimeError, match=r"trl is not installed.*torch==2\.13\.0.*bench-trl"):
        peers.check_peers(("trl",))
    peers.check_peers(())  # no peers: nothing to check
    out = tmp_path / "bench"
    cfg = EfficiencyConfig.from_dict(dict(peers=("trl",)))
    with pytest.raises(RuntimeError, match=r"pip install -e \"\.\[bench-trl\]\""):
        run_mod.run(cfg, out, progress=False)
    assert not out.exists()  # nothing was started


def test_wrong_trl_version_is_refused(monkeypatch):
    monkeypatch.setattr(peers.importlib.util, "find_spec", lambda n, *a: object())
    monkeypatch.setitem(__import__("sys").modules, "trl", SimpleNamespace(__version__="0.9.0"))
    with pytest.raises(RuntimeError, match=r"trl 0\.9\.0 is installed.*1\.16\.0"):
        peers.check_peers(("trl",))


def test_peer_clock_excludes_evaluation_and_stops_on_budget():
    """A simulated loop of 0.05 s steps with 0.2 s evaluations and 0.3 s of Stage 1: the clock
    counts Stage 1 and the steps, never the evaluations, and stops at the budget."""
    calls = []

    def slow_eval(model):
        calls.append(model)
        time.sleep(0.2)
        return {"expected_accuracy": 0.5}

    clock = peers.PeerClock(1.3, 0.25, slow_eval, lambda: 0.3)
    control = SimpleNamespace(should_training_stop=False)
    state = SimpleNamespace(global_step=0)
    t0 = time.perf_counter()
    clock.on_train_begin(None, state, control, model="m")
    while not control.should_training_stop and state.global_step < 1000:
        time.sleep(0.05)
        state.global_step += 1
        clock.on_step_end(None, state, control, model="m")
    clock.on_train_end(None, state, control, model="m")
    wall = time.perf_counter() - t0
    assert clock.stage1_s == 0.3 and 1.0 <= clock.train_s < 1.0 + 0.1
    assert wall >= clock.train_s + 0.2 * len(calls) - 0.02
    times = [e["stage2_time"] for e in clock.evals]
    assert times[0] == pytest.approx(0.0, abs=0.01) and times == sorted(times)
    assert len(calls) == len(clock.evals) >= 5  # start, every 0.25 s, the last step
    assert clock.evals[-1]["step"] == clock.steps == state.global_step
    assert all(b - a < 0.25 + 0.1 for a, b in itertools.pairwise(times))


def test_peer_clock_refuses_a_stage1_longer_than_the_budget():
    clock = peers.PeerClock(1.0, 0.5, lambda m: {}, lambda: 2.0)
    with pytest.raises(RuntimeError, match=r"Stage 1 took 2\.0 s of a 1\.0 s budget"):
        clock.on_train_begin(None, SimpleNamespace(global_step=0), SimpleNamespace(), model="m")


def test_trl_reward_adapts_exact_match():
    got = peers.trl_reward(["1+1="], [" 2 "], answer=["2"], trainer_state=None, completion_ids=[])
    assert got == [1.0]
    assert peers.trl_reward(["1+1=", "2+2="], ["3", "4"], answer=["2", "4"]) == [0.0, 1.0]


def test_report_handles_peer_runs():
    res = fake_result()
    for seed, accs in ((0, [0.2, 0.3, 0.35]), (1, [0.2, 0.3, 0.3])):
        run = fake_run("trl_grpo", seed, [0.0, 10.0, 20.0], accs, mem=30.0, spp=8)
        run["algo"] = "trl_grpo"
        run["phases"] = {"stage1": 0.0, "generate": 5.0, "rest": 15.0}
        res["runs"].append(run)
    res["sweep"]["trl_grpo"] = {"scores": {"0.001": 0.3}, "chosen": 1e-3}
    res["peers"] = {"trl": peers.peer_info(EfficiencyConfig.from_dict(dict(peers=("trl",))))}
    s = summarize(res)
    res["summary"] = s
    t = s["arms"]["TRL GRPO"]
    assert t["samples_per_prompt"] == 8 and t["phases_s"]["rest"] == pytest.approx(15.0)
    assert t["time_to_target"]["25%"]["times"] == pytest.approx([10.0, 10.0])
    assert s["ratios"]["TRL GRPO"]["25%"]["ratio"] == pytest.approx(1.0)  # A*-PO: 10 s too
    assert s["ratios"]["TRL GRPO"]["memory"]["ratio"] == pytest.approx(10.0 / 30.0)
    md = to_markdown(res)
    assert "| TRL GRPO |" in md and "TRL GRPO: 0.001 -> 0.300" in md
    assert "Peers: trl 1.16.0" in md and "| A2PO all-wrong prompts |" in md
    assert not math.isnan(s["arms"]["TRL GRPO"]["final"]["expected_accuracy"]["mean"])


def test_peer_info_records_the_differences():
    info = peers.peer_info(
        EfficiencyConfig.from_dict(dict(peers=("trl",), batch_size=16, group_size=4))
    )
    assert info["version"] == peers.TRL_VERSION
    diff = info["differences"]
    assert "64 completions = 16 prompts x num_generations=4" in diff["GRPO rollout batch"]["trl"]
    assert all(set(d) == {"trl", "ours"} for d in diff.values())


def test_sweep_covers_the_peer_runs(tmp_path):
    """The learning-rate sweep runs every peer like an algorithm (Stage 1 table reused)."""
    from experiments.efficiency.run import sweep_rates

    cfg = EfficiencyConfig.from_dict(dict(algos=("astarpo",), lr_grid=(1e-4, 1e-3), peers=("trl",),
                           grid_extensions=0))  # fmt: skip
    started = []

    class FakeRunner:
        say = staticmethod(print)

        def run(self, name, spec):
            started.append((name, spec["arm"], spec["stage1_inside"], spec["values"]))
            acc = 0.5 if spec["lr"] == 1e-3 else 0.3
            return fake_run(spec["arm"], spec["seed"], [0.0, 25.0], [acc, acc])

        def run_all(self, runs, workers=None, rerun_slow=None):
            return [self.run(n, s) for n, s in runs]

    lrs = sweep_rates(FakeRunner(), cfg, {"values": "/v.jsonl"})
    assert set(lrs) == {"astarpo", "trl_grpo", "trl_a2po", "astarpo_drop"}
    assert all(w["chosen"] == 1e-3 for w in lrs.values())
    assert ("sweep-trl_a2po-lr0.0001", "trl_a2po", False, "/v.jsonl") in started
    assert len(started) == 6


def test_docs_table_is_the_recorded_differences():
    """docs/baselines.md's "Peers: TRL" table is peer_info at the defaults, row for row."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "baselines.md").read_text()
    assert "TRL 1.16.0" in doc
    for k, d in peers.peer_info(EfficiencyConfig.from_dict(dict(peers=("trl",))))[
        "differences"
    ].items():
        assert f"| {k} | {d['trl']} | {d['ours']} |" in doc, k
