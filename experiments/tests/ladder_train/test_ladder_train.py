"""The ladder-train study: its settings refuse bad values by name, its rates are the paper
protocol's, its runs are the groups it states, its verdicts, 2x2, thresholds and gain curve
follow their rule on runs with a known answer (Holm over the whole family), and
``python -m experiments.ladder_train`` maps its flags."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from experiments.harness.protocol import DROP_ARM
from experiments.ladder_train.config import (
    PAPER_RATES,
    QUICK,
    LadderTrainConfig,
    parse_rates,
    plan,
    presets,
    rates,
)
from experiments.ladder_train.summary import (
    MIN_GAIN,
    one_sided_p,
    summarize,
    threshold,
)

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"near": ("[-9,-10)",)}, "near"),
        ({"near": ("[0,-1)",)}, "other than easy"),
        ({"main_arms": ("astarpo", "sac")}, "unknown runs"),
        ({"side_arms": ("grpo",)}, "must not share"),
        ({"main_arms": ()}, "at least one"),
        ({"bins": ("[0,-1)", "[0,-1)")}, "without repeats"),
        ({"lrs": ("astarpo=fast",)}, "NAME=RATE"),
        ({"lrs": ("astarpo=-1",)}, "NAME=RATE"),
        ({"lrs": ("astarpo=1e-4", "astarpo=3e-5")}, "twice"),
        ({"lrs": ("astarpo=1e-4",)}, "no rate for"),
        ({"sweep_seed": 2}, "measured seed"),
        ({"lr_grid": (1e-4, 3e-4), "train_eval_rows": 0}, "train_eval_rows"),
        ({"lr_grid": (1e-4, 0.0)}, "lr_grid"),
        ({"steps": 0}, "steps must be an integer >= 1"),
        ({"seeds_main": 0}, "seeds_main"),
    ],
)
def test_bad_configs_are_refused(fields: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LadderTrainConfig.from_dict(dict(**fields))


def test_a_bin_outside_the_ladder_it_runs_is_refused_before_any_work() -> None:
    cfg = LadderTrainConfig.from_dict(dict(bins=("[-1,-3)",), near=()))
    with pytest.raises(ValueError, match=r"--ladder DIR"):
        cfg.ladder_config()
    assert LadderTrainConfig.from_dict(dict(**QUICK)).ladder_config().bins == ("0:-1", "-2:-3")


def test_default_rates_are_the_paper_protocols_chosen_rates() -> None:
    sweep = json.loads((ROOT / "docs/figures/paper_protocol_120.json").read_text())["sweep"]
    for algo, rate in parse_rates(PAPER_RATES).items():
        assert rate == pytest.approx(sweep[algo]["chosen"], rel=1e-9)
    got = rates(LadderTrainConfig())
    assert got[DROP_ARM] == got["astarpo"] and set(got) == {
        "astarpo",
        "grpo",
        DROP_ARM,
        "ppo",
        "rebel",
    }
    # a run name's own rate, and a sweep's choice, come first
    cfg = LadderTrainConfig.from_dict(dict(lrs=(*PAPER_RATES, "astarpo_drop=1e-5")))
    assert rates(cfg)[DROP_ARM] == 1e-5 and rates(cfg, {"grpo": 3e-4})["grpo"] == 3e-4


def test_the_plan_holds_the_stated_groups_seed_major() -> None:
    cfg = LadderTrainConfig()
    runs = plan(cfg)
    alone = [r for r in runs if r[2] == "alone"]
    assert len([r for r in alone if r[0] in ("astarpo", "grpo")]) == 6 * 2 * 5
    assert {r[1] for r in alone if r[0] == "ppo"} == {"[-2,-3)", "[-3,-4)"}
    assert len([r for r in alone if r[0] in (DROP_ARM, "ppo", "rebel")]) == 2 * 3 * 3
    mixed = [r for r in runs if r[2] == "mixed"]
    assert len(mixed) == 2 * 2 * 5 and {r[0] for r in mixed} == {"astarpo", "grpo"}
    assert [r[3] for r in runs] == sorted(r[3] for r in runs)  # seed-major
    assert len(set(runs)) == len(runs)
    assert (
        presets({}, True)["steps"] == QUICK["steps"] and presets({}, False)["task"] == "scratchpad"
    )


def test_one_sided_p() -> None:
    assert one_sided_p([0.1, 0.11, 0.12], MIN_GAIN) < 0.01
    assert one_sided_p([0.0, 0.0, 0.0], MIN_GAIN) == 1.0
    assert one_sided_p([0.1], MIN_GAIN) != one_sided_p([0.1], MIN_GAIN)  # NaN


#: Three bins with known v_ref, highest first.
BINS = {"[0,-1)": -0.5, "[-2,-3)": -2.5, "[-3,-4)": -3.5}


def _run(arm: str, b: str, set_name: str, seed: int, gain: float) -> dict:
    ref = {"bin_expected_accuracy": 0.1, "bin_log10_gold": -2.0, "easy_expected_accuracy": 0.3}
    last = {**ref, "bin_expected_accuracy": 0.1 + gain, "step": 10}
    first = {"step": 3, "sample": 40, "seconds": 1.0} if gain > 0 else None
    return {
        "arm": arm, "bin": b, "set": set_name, "seed": seed, "steps": 10,
        "evals": [{**ref, "step": 0}, last], "samples": {"bin": 160, "easy": 0},
        "successes": {"bin": int(gain > 0), "easy": 0}, "first_success": first,
    }  # fmt: skip


def _result(runs: list[dict]) -> dict:
    ref = {"bin_expected_accuracy": 0.1, "bin_log10_gold": -2.0, "easy_expected_accuracy": 0.3}
    bins = {b: {"test_log10_v_ref": {"median": x, "mean": x}} for b, x in BINS.items()}
    for b in bins:
        bins[b]["v_star"] = {"mean": 0.0, "fraction_zero": 1.0}
    config = {"bins": list(BINS), "near": ["[-2,-3)"], "easy": "[0,-1)", "steps": 10}
    config.update(batch_size=16, n_samples=8, sweep_bin="[-2,-3)")
    return {"config": config, "bins": bins, "reference": dict.fromkeys(BINS, ref), "runs": runs,
            "ladder": "L", "stage1": {"prompts": 30, "seconds": 1.0}, "rates": {"astarpo": 3e-5},
            "sizes": {b: {"train": 10, "test": 10} for b in BINS}}  # fmt: skip


GAINS = {  # (arm, bin, set) -> per-seed gains
    ("astarpo", "[0,-1)", "alone"): [0.10, 0.11, 0.12],
    ("astarpo", "[-2,-3)", "alone"): [0.0, 0.001, -0.001],
    ("astarpo", "[-3,-4)", "alone"): [0.20, 0.21, 0.22],  # learned below a failure
    ("grpo", "[0,-1)", "alone"): [0.10, 0.12, 0.11],
    ("grpo", "[-2,-3)", "alone"): [0.05, 0.06, 0.055],
    ("grpo", "[-3,-4)", "alone"): [0.0, 0.0, 0.0],
    ("astarpo", "[-2,-3)", "mixed"): [0.04, 0.05, 0.045],
    ("grpo", "[-2,-3)", "mixed"): [0.06, 0.05, 0.055],
    ("ppo", "[-2,-3)", "alone"): [0.3],  # one seed: n/a, left out of the family
}


def test_verdicts_two_by_two_thresholds_and_curve_have_the_known_answer() -> None:
    runs = [_run(a, b, s, i, g) for (a, b, s), gs in GAINS.items() for i, g in enumerate(gs)]
    runs.append({"arm": DROP_ARM, "bin": "[-2,-3)", "set": "alone", "seed": 0, "skipped": "x"})
    s = summarize(_result(runs))
    c = s["cells"]
    assert c["grpo"]["alone|[-2,-3)"]["verdict"] == "learns"
    assert c["astarpo"]["alone|[-2,-3)"]["verdict"] == "does not learn"
    assert c["grpo"]["alone|[-3,-4)"]["verdict"] == "does not learn"
    assert c["ppo"]["alone|[-2,-3)"]["verdict"] == "n/a"
    skipped = c[DROP_ARM]["alone|[-2,-3)"]
    assert (skipped["skipped"], skipped["verdict"], skipped["seeds"]) == ("x", "n/a", 0)
    # Holm over the 8 cells with >= 2 seeds: the adjusted p is at most 8 times the raw one
    family = [x for row in c.values() for x in row.values() if x["seeds"] >= 2]
    assert len(family) == 8
    smallest = min(family, key=lambda x: x["p"])
    assert smallest["p_holm"] == pytest.approx(min(1.0, 8 * smallest["p"]))
    assert c["grpo"]["alone|[-2,-3)"]["gain"]["mean"] == pytest.approx(0.055)
    assert c["grpo"]["alone|[-2,-3)"]["first_success"] == {"seeds": 3, "median_step": 3.0}
    # per-seed counts: all three GRPO seeds gain on [-2,-3); none of A*-PO's does
    assert c["grpo"]["alone|[-2,-3)"]["seeds_gaining"] == 3
    assert c["astarpo"]["alone|[-2,-3)"]["seeds_gaining"] == 0
    # the 2x2 of the near bin
    t = s["two_by_two"]["[-2,-3)"]
    assert t["astarpo"]["reading"] == "learns only with the easy prompts mixed in"
    assert t["grpo"]["reading"] == "learns alone and mixed" and "ppo" not in t
    # thresholds: GRPO stops at [-3,-4); A*-PO at [-2,-3), yet learns [-3,-4) below it
    g, a = s["thresholds"]["grpo"], s["thresholds"]["astarpo"]
    assert (g["learns_down_to"], g["stops_at"], g["monotone"]) == ("[-2,-3)", "[-3,-4)", True)
    assert g["stops_at_log10_v_ref"] == -3.5
    assert (a["stops_at"], a["monotone"], a["learned"]) == ("[-2,-3)", False, ["[0,-1)", "[-3,-4)"])
    # the gain curve: one point per bin at its median log10 v_ref, highest first
    pts = s["curve"]["grpo"]["alone"]
    assert [p["log10_v_ref"] for p in pts] == [-0.5, -2.5, -3.5]
    assert [p["bin"] for p in s["curve"]["astarpo"]["mixed"]] == ["[-2,-3)"]
    assert s["order"] == list(BINS)


def test_threshold_edges() -> None:
    learns, no = {"verdict": "learns"}, {"verdict": "does not learn"}
    every = threshold(["a", "b"], {"a": learns, "b": learns})
    assert every["stops_at"] is None and every["learns_down_to"] == "b"
    none = threshold(["a", "b"], {"a": no, "b": no})
    assert none["learns_down_to"] is None and none["stops_at"] == "a" and none["monotone"]


def test_the_report_and_its_figure(tmp_path: Path) -> None:
    from PIL import Image

    from experiments.ladder_train.report import plot, to_markdown

    runs = [_run(a, b, s, i, g) for (a, b, s), gs in GAINS.items() for i, g in enumerate(gs)]
    res = _result(runs)
    res["summary"] = summarize(res)
    md = to_markdown(res)
    assert "| [-2,-3) | GRPO | learns | learns | learns alone and mixed |" in md
    assert "learns down to [-2,-3) (-2.50); stops at [-3,-4)" in md
    assert "| GRPO | alone | [-2,-3) | 3 | " in md and "| learns | 3/3 |" in md
    plot(res, tmp_path / "lt.png")  # strict: fonts, width, legend entries
    with Image.open(tmp_path / "lt.png") as im:
        assert im.size[0] <= 7.5 * 150 + 1


def test_cli_maps_flags_to_the_config(captured_run, tmp_path: Path, capsys) -> None:
    from experiments.tests.lab_setup import run_cli as main

    seen = captured_run("experiments.ladder_train", "ladder_train", "who learns")
    argv = ["ladder-train", "--quick", "--out", str(tmp_path), "--workers", "3"]
    assert main([*argv, "--lrs", "astarpo=1e-4,grpo=2e-4,ppo=1e-5,rebel=1e-5"]) == 0
    cfg = seen["cfg"]
    assert cfg.workers == 3 and cfg.train.max_steps == QUICK["steps"] and cfg.task == "scratchpad"
    assert parse_rates(cfg.lrs)["grpo"] == 2e-4 and "who learns" in capsys.readouterr().out
    # bins as the ladder's HI:LO, or as labels (whose commas the list splits), are labels
    assert main([*argv, "--bins=-2:-3,[-3,-4)", "--near=[-3,-4)", "--easy=0:-1"]) == 0
    assert seen["cfg"].bins == ("[-2,-3)", "[-3,-4)") and seen["cfg"].near == ("[-3,-4)",)
    assert seen["cfg"].easy == "[0,-1)"
    assert main(["ladder-train", "--out", str(tmp_path), "--lrs", "astarpo=x"]) == 2
    assert "NAME=RATE" in capsys.readouterr().err


def test_the_sweep_brackets_each_algorithm_on_seeds_disjoint_from_the_measured() -> None:
    from experiments.ladder_train.report import _bracket_text
    from experiments.ladder_train.run import _sweep

    class FakeRunner:
        def __init__(self) -> None:
            self.names: list[str] = []
            self.batches: list[int] = []

        def say(self, *a: object) -> None:
            pass

        def run_all(self, runs: list) -> list[dict]:
            self.batches.append(len(runs))
            return [self.run(*r) for r in runs]

        def run(self, name: str, spec: dict) -> dict:
            self.names.append(name)
            best = 1e-4 if spec["arm"] == "grpo" else 3e-5
            acc = 0.5 - abs(math.log10(spec["lr"] / best))
            return {"evals": [{"step": 0, "train_expected_accuracy": 0.1},
                              {"step": 10, "train_expected_accuracy": acc}]}  # fmt: skip

    cfg = LadderTrainConfig.from_dict(
        dict(main_arms=("astarpo", "grpo"), side_arms=(), mixed_arms=())
    )
    cfg = LadderTrainConfig.from_dict({**cfg.to_dict(), "lr_grid": (1e-4, 3e-4), "steps": 10})
    seen: list[tuple] = []

    def spec(arm: str, b: str, set_name: str, seed: int, lr: float) -> dict:
        seen.append((arm, b, set_name, seed))
        return {"arm": arm, "lr": lr}

    runner = FakeRunner()
    got = _sweep(runner, cfg, spec)  # type: ignore[arg-type]
    assert got["grpo"]["chosen"] == 1e-4 and got["grpo"]["extended"] == [3.33e-05]
    assert got["astarpo"]["chosen"] == 3.33e-05  # below the grid: found by the extension
    assert {s[3] for s in seen} == {cfg.sweep_seed} and {s[1] for s in seen} == {cfg.sweep_bin}
    assert all(n.startswith("sweep-") for n in runner.names)
    # two rounds of parallel runs (both grids, then both extensions), each run once
    assert runner.batches == [4, 2] and len(runner.names) == len(set(runner.names)) == 6
    assert rates(cfg, {k: v["chosen"] for k, v in got.items()})["grpo"] == 1e-4
    # the report says whether each choice is bracketed: GRPO's 1e-4 is (3.33e-5 below it)
    assert _bracket_text(got["grpo"]) == "yes" and _bracket_text(got["astarpo"]) == "no: lowest"
    assert _bracket_text({"scores": {"1e-4": 0.1, "3e-4": 0.2}, "chosen": 3e-4}) == "no: highest"


def test_entropy_bonus_is_a_field_with_the_papers_default() -> None:
    from experiments.ladder_train.config import LadderTrainConfig

    assert LadderTrainConfig().train.entropy_coef == 1e-3
    assert LadderTrainConfig.from_dict(dict(entropy_coef=0.0)).train.entropy_coef == 0.0
    with pytest.raises(ValueError, match="entropy_coef must be a finite number >= 0"):
        LadderTrainConfig.from_dict(dict(entropy_coef=-1.0))
