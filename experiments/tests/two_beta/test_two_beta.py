"""The two-beta study: V* re-made at each beta1 from the same rewards, its paired verdicts
follow their rule (both ways), and a tiny run goes end to end."""

from __future__ import annotations

import math

import numpy as np
import pytest

from astarpo import optimal_value
from astarpo.llm import ValueTable
from astarpo.llm.stage1.rows import ValueRow
from experiments.two_beta.config import QUICK, TwoBetaConfig, presets
from experiments.two_beta.report import summarize, to_markdown
from experiments.two_beta.run import table_at


def _table() -> ValueTable:
    rows = [
        ValueRow(f"k{i}", f"p{i}", r, float(optimal_value(np.array(r), 0.5)), float(np.mean(r)))
        for i, r in enumerate([(0.0, 1.0, 0.0, 0.0), (1.0, 1.0, 1.0, 0.0), (0.0,) * 4])
    ]
    return ValueTable(rows)


def test_table_at_remakes_v_star_from_the_same_rewards() -> None:
    table = _table()
    for b1 in (1e-3, 0.5, 2.0):
        new = table_at(table, b1)
        for old, row in zip(table, new, strict=True):
            assert row.rewards == old.rewards and row.prompt == old.prompt
            r = np.array(old.rewards)
            # float64 reference: beta1 log mean exp(r / beta1)
            ref = b1 * (np.log(np.mean(np.exp((r - r.max()) / b1))) + r.max() / b1)
            assert row.v_star == pytest.approx(ref, abs=1e-12)
            assert row.provenance["beta1"] == b1
    # beta1 = 1e-3 is the max of the rewards; 1e3 the mean, within 1 / (8 beta1) (Hoeffding)
    assert [r.v_star for r in table_at(table, 1e-3)] == pytest.approx([1.0, 1.0, 0.0], abs=2e-3)
    for row in table_at(table, 1e3):
        r = np.array(row.rewards)
        assert 0 <= row.v_star - r.mean() <= 1 / 8e3


def test_config_checks_and_presets() -> None:
    with pytest.raises(ValueError, match=r"must hold 0\.5"):
        TwoBetaConfig.from_dict(dict(beta1s=(1e-3, 2.0)))
    with pytest.raises(ValueError, match="no value twice"):
        TwoBetaConfig.from_dict(dict(beta1s=(0.5, 0.5)))
    with pytest.raises(ValueError, match="learning_rates"):
        TwoBetaConfig.from_dict(dict(learning_rates=(0.0,)))
    with pytest.raises(ValueError, match="target_fractions"):
        TwoBetaConfig.from_dict(dict(target_fractions=(1.0,)))
    cfg = TwoBetaConfig.from_dict(dict(**presets({}, quick=False)))
    assert cfg.task == "scratchpad" and cfg.astarpo.beta2 == 1e-3 and 0.5 in cfg.beta1s
    assert presets({}, quick=True)["seeds"] == QUICK["seeds"] == 2


def _runs(shift: float, noise: float, seeds: int = 6) -> list[dict]:
    """Synthetic runs: beta1 = 1e-3 ends ``shift`` lower and has ``noise`` x the gradient
    norm; every other beta1 is beta1 = 0.5 with per-seed jitter."""
    rng = np.random.default_rng(0)
    out = []
    for s in range(seeds):
        base = 0.6 + 0.05 * rng.standard_normal()
        for b1 in (1e-3, 0.5, 2.0):
            j = 0.002 * rng.standard_normal()
            final = base + j - (shift if b1 == 1e-3 else 0.0)
            scale = (noise if b1 == 1e-3 else 1.0) * (1 + 0.01 * rng.standard_normal())
            evals = [
                {"step": 0, "expected_accuracy": 0.3, "kl": 0.0},
                {"step": 10, "expected_accuracy": (0.3 + final) / 2, "kl": 0.1},
                {"step": 20, "expected_accuracy": final, "kl": 0.2},
            ]
            out.append({"lr": 1e-4, "beta1": b1, "seed": s, "evals": evals,
                        "grad_norm": list(scale * np.linspace(1, 2, 5))})  # fmt: skip
    return out


def _summary(runs: list[dict]) -> dict:
    cfg = {"learning_rates": (1e-4,), "beta1s": (1e-3, 0.5, 2.0), "target_fractions": (0.5,)}
    return summarize({"config": cfg, "runs": runs})["by_rate"]["0.0001"]


def test_verdicts_come_out_either_way() -> None:
    same = _summary(_runs(shift=0.0, noise=1.0))
    assert same["verdict"] == {
        "accuracy": "no difference found",
        "noise": "no difference found",
        "reading": "no effect",
    }
    moved = _summary(_runs(shift=0.2, noise=3.0))  # lower accuracy with more noise
    assert moved["verdict"] == {
        "accuracy": "differs (beta1 = 0.001)",
        "noise": "differs (beta1 = 0.001)",
        "reading": "through the noise",
    }
    pair = moved["paired"]["0.001"]
    assert pair["final"]["diff"] == pytest.approx(-0.2, abs=0.01)
    assert pair["grad_sq"]["ratio"] == pytest.approx(9.0, rel=0.05)  # squared norms
    assert pair["final"]["p_holm"] >= pair["final"]["p"]
    cell = moved["cells"]["0.5"]
    assert cell["final"]["n"] == 6 and cell["steps_to"]["50%"]["reached"] == 6
    # lower accuracy with the same noise, or with less noise: not through the noise
    assert _summary(_runs(shift=0.2, noise=1.0))["verdict"]["reading"] == "not through the noise"
    assert _summary(_runs(shift=0.2, noise=0.3))["verdict"]["reading"] == "not through the noise"
    assert _summary(_runs(shift=0.0, noise=3.0))["verdict"]["reading"] == "noise only"
    few = _summary(_runs(shift=0.2, noise=3.0, seeds=1))
    assert few["verdict"]["reading"] == "inconclusive"


def test_markdown_states_the_rule_and_each_rate() -> None:
    runs = _runs(shift=0.0, noise=1.0)
    cfg = dict(
        TwoBetaConfig.from_dict(dict(beta1s=(1e-3, 0.5, 2.0), learning_rates=(1e-4,))).to_dict(),
        target_fractions=(0.5,),
    )
    result = {"config": cfg, "runs": runs}
    result["summary"] = summarize(result)
    md = to_markdown(result)
    assert "**Rule.**" in md and "## Learning rate 0.0001" in md and "Holm" in md
    assert not any(
        math.isnan(r["final"]["mean"])
        for r in result["summary"]["by_rate"]["0.0001"]["cells"].values()
    )


@pytest.mark.slow
def test_a_tiny_study_runs_end_to_end(tmp_path) -> None:
    from experiments.registry import STUDIES
    from experiments.tests.lab_setup import TINY

    study = STUDIES["two-beta"]
    small = dict(sft_steps=1, model_overrides=TINY, batch_size=2, pool_size=4, eval_size=4)
    small.update(n_samples=2, cache_dir=str(tmp_path / "cache"), max_steps=2, eval_steps=1)
    small.update(beta1s=(1e-3, 0.5), seeds=2, workers=1)
    cfg = TwoBetaConfig.from_dict(dict(**{**presets({}, quick=True), **small}))
    res = study.run(cfg, tmp_path / "out", progress=False)
    assert len(res["runs"]) == 4 and {r["beta1"] for r in res["runs"]} == {1e-3, 0.5}
    assert all(len(r["grad_norm"]) == 2 and r["steps"] == 2 for r in res["runs"])
    assert all([e["step"] for e in r["evals"]] == [0, 1, 2] for r in res["runs"])
    # the paired runs of a seed start from the same reference at step 0
    by_seed = {}
    for r in res["runs"]:
        by_seed.setdefault(r["seed"], set()).add(round(r["evals"][0]["expected_accuracy"], 12))
    assert all(len(v) == 1 for v in by_seed.values())
    tables = {
        b: ValueTable.load(tmp_path / "out" / "values" / f"beta1-{b:g}.jsonl") for b in (1e-3, 0.5)
    }
    for lo, hi in zip(tables[1e-3], tables[0.5], strict=True):
        assert lo.rewards == hi.rewards and lo.v_star >= hi.v_star - 1e-12  # V* falls with beta1
    for name in ("two_beta.json", "two_beta.md", "two_beta.png"):
        assert (tmp_path / "out" / name).is_file()
