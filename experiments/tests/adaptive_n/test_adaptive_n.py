"""The adaptive-N study's run and report on a synthetic ladder folder (no model)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from experiments.adaptive_n.config import AdaptiveNConfig
from experiments.adaptive_n.report import verdict
from experiments.adaptive_n.run import ladder_samples, run


def fake_ladder(folder: Path, k: int = 16, seed: int = 0) -> dict[str, float]:
    """A ladder folder of two bins whose samples are Bernoulli(v_ref) draws."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    rates = {"[0,-1)": 0.5, "[-1,-2)": 0.03}
    prompts, samples = [], []
    for b, v in rates.items():
        for i in range(60):
            split = "train" if i < 30 else "test"
            row = {"bin": b, "split": split, "prompt": f"{b}{i}=", "answer": "a"}
            row.update(gold_response="a", v_ref=v)
            prompts.append(json.dumps(row) + "\n")
            bits = "".join("1" if x else "0" for x in rng.random(k) < v)
            samples.append(json.dumps({**row, "k": k, "solved": bits}) + "\n")
    (folder / "ladder_prompts.jsonl").write_text("".join(prompts))
    (folder / "ladder_samples.jsonl").write_text("".join(samples))
    (folder / "ladder.json").write_text(json.dumps({"config": {"k": k}}))
    return rates


def test_reads_the_ladder_and_writes_the_report(tmp_path: Path) -> None:
    fake_ladder(tmp_path / "ladder")
    folder = str(tmp_path / "ladder")
    cfg = AdaptiveNConfig.from_dict(
        dict(ladder=folder, k=16, fixed=(2, 4, 8, 16), adaptive=(4, 8), cap=16)
    )
    res = run(cfg, tmp_path / "out", progress=False)
    for name in ("adaptive_n.json", "adaptive_n.md", "adaptive_n.png"):
        assert (tmp_path / "out" / name).is_file()
    rules = res["errors"]["rules"]
    assert set(rules) == {f"fixed N={n}" for n in (2, 4, 8, 16)} | {"adaptive N=4", "adaptive N=8"}
    # the adaptive rule moves samples from the easy bin to the hard one
    assert (
        rules["adaptive N=8"]["[-1,-2)"]["samples"] > 8 > rules["adaptive N=8"]["[0,-1)"]["samples"]
    )
    assert set(res["summary"]["N=8"]) == {"[0,-1)", "[-1,-2)", "all"}
    md = (tmp_path / "out" / "adaptive_n.md").read_text()
    assert "Holm-adjusted" in md and "[-1,-2)" in md
    with pytest.raises(FileExistsError, match="--overwrite"):
        run(cfg, tmp_path / "out", progress=False)


def test_a_ladder_folder_that_does_not_match_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"finished `python -m experiments\.ladder`"):
        ladder_samples(tmp_path)
    fake_ladder(tmp_path / "l")
    lines = (tmp_path / "l" / "ladder_samples.jsonl").read_text().splitlines()
    (tmp_path / "l" / "ladder_samples.jsonl").write_text("\n".join(lines[1:]) + "\n")
    with pytest.raises(ValueError, match="different prompts"):
        ladder_samples(tmp_path / "l")


def test_the_verdict_rule() -> None:
    assert verdict({"diff": -1.0, "p_holm": 0.01}) == "lower"
    assert verdict({"diff": 1.0, "p_holm": 0.01}) == "higher"
    assert verdict({"diff": -1.0, "p_holm": 0.2}) == "no difference shown"
    assert verdict({"diff": -1.0, "p_holm": float("nan")}) == "no difference shown"


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"fixed": (2, 128)}, "k >= 128"),
        ({"fixed": ()}, "non-empty tuple"),
        ({"adaptive": (1,), "pilot": 2}, "pilot <= every budget"),
        ({"cap": 128}, "cap <= k"),
        ({"beta1": 0.0}, "beta1"),
    ],
)
def test_bad_configs_are_refused(fields: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        AdaptiveNConfig.from_dict(dict(**fields))


def test_the_ladder_it_builds_keeps_its_reference_settings() -> None:
    """The ladder the study builds has the study's reference (SFT settings and cache), not the
    ladder's defaults; the defaults give the ladder's own."""
    from dataclasses import replace

    from experiments.harness.ladder_sets import LadderConfig

    cfg = AdaptiveNConfig()
    protocol = replace(cfg.protocol, sft=replace(cfg.protocol.sft, seed=3), cache_dir="/tmp/c")
    built = replace(cfg, protocol=protocol).ladder_config()
    assert built.protocol.sft.seed == 3 and built.protocol.cache_dir == "/tmp/c"
    assert cfg.ladder_config().protocol == LadderConfig().protocol
