"""The quick CPU demo end to end (the README's main command, smaller)."""

from __future__ import annotations

import json

import pytest

from astarpo.cli import main


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_quick_demo_improves_heldout_accuracy_over_reference(tmp_path, capsys):
    out = tmp_path / "demo"
    rc = main(["demo", "--quick", "--out", str(out), "--cache-dir", str(tmp_path / "cache"),
               "--no-progress"])  # fmt: skip
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    ref, final = report["reference"], report["final"]
    assert ref["step"] == 0 and final["step"] == report["train"]["steps"]
    # Held-out problems are disjoint from SFT and RL prompts; 400 problems x 2 samples, so a
    # gain of 0.05 is several standard errors.
    assert final["sampled_pass@1"] > ref["sampled_pass@1"] + 0.05, report["curve"]
    assert final["greedy_pass@1"] >= ref["greedy_pass@1"] - 0.02, report["curve"]
    assert report["sft"]["cached"] is False
    assert (out / "accuracy_vs_time.png").stat().st_size > 1000
    md = (out / "report.md").read_text()
    assert "| step |" in md and md in capsys.readouterr().out
    assert (out / "v_star.jsonl").exists() and (out / "train" / "metrics.jsonl").exists()


def test_demo_task_settings_come_from_the_task(monkeypatch, tmp_path):
    """``--task scratchpad`` gives the task's budget, model shape, reward and SFT target; an
    unknown task and a test set overlapping SFT's check rows are refused."""
    from astarpo.llm.toy import demo as demo_mod
    from astarpo.llm.toy.demo import CHECK, HELDOUT_POOL, REFERENCE_TARGET, DemoConfig
    from astarpo.llm.toy.tasks import get_task

    cfg = DemoConfig.make(quick=True, task="scratchpad")
    spec = get_task("scratchpad")
    assert cfg.task == "scratchpad" and cfg.train.max_new_tokens == spec.max_new_tokens == 78
    assert cfg.model == spec.model and cfg.sft.target_accuracy == REFERENCE_TARGET
    assert cfg.sft.learning_rate == spec.sft_lr
    assert DemoConfig.make(task="scratchpad").n_test == HELDOUT_POOL - CHECK
    plain = DemoConfig.make(quick=True)
    assert plain.task == "addition" and plain.sft.target_accuracy is None
    assert plain.train.max_new_tokens == 5 and plain.model == {}
    with pytest.raises(ValueError, match="unknown task 'subtraction'"):
        DemoConfig.make(task="subtraction")
    with pytest.raises(ValueError, match="n_test must be <= 800"):
        DemoConfig(**{**cfg.__dict__, "n_test": 900})

    seen = {}

    def fake_run(out, quick, cfg):
        seen["cfg"], seen["quick"] = cfg, quick
        (tmp_path / "report.md").write_text("| step |\n")
        return {}

    monkeypatch.setattr(
        demo_mod, "_run_demo", lambda out, quick, cache, progress, cfg: fake_run(out, quick, cfg)
    )
    assert main(["demo", "--quick", "--task", "scratchpad2", "--out", str(tmp_path)]) == 0
    assert seen["cfg"].task == "scratchpad2" and seen["quick"]
    assert seen["cfg"].train.max_new_tokens == get_task("scratchpad2").max_new_tokens


# ------------------------------------------------------------ what the demo may replace


def _tiny_demo(out):
    """The demo's settings shrunk to seconds (1 SFT step, 4 prompts, 1 A*-PO step)."""
    from dataclasses import replace

    from toy_setup import TINY

    from astarpo.llm.toy.demo import DemoConfig
    from astarpo.llm.toy.sft import SFTConfig

    cfg = DemoConfig.make(quick=True, out_dir=str(out))
    train = replace(cfg.train, max_steps=1, batch_size=4, report_to="none", progress=False)
    return replace(cfg, n_train=4, n_test=4, sft=SFTConfig(1, 4, 2e-3), train=train,
                   n_samples=2, eval_samples=1, eval_steps=1, model=TINY)  # fmt: skip


def _user_run(folder):
    """A training run of the user's in ``folder``."""
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text('{"step": 1}\n')
    (folder / "run_config.json").write_text("{}\n")
    (folder / "checkpoint-1").mkdir()
    return sorted(p.name for p in folder.iterdir())


def test_demo_refuses_before_sft_what_it_did_not_write(tmp_path, monkeypatch, capsys):
    from astarpo.llm.toy import demo as demo_mod

    def no_sft(*args, **kwargs):
        raise AssertionError("refused only after the SFT")

    monkeypatch.setattr(demo_mod, "cached_sft", no_sft)
    out = tmp_path / "d"
    before = _user_run(out / "train")
    assert main(["demo", "--quick", "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "no astarpo_demo.json" in err and "--overwrite" in err, err
    assert sorted(p.name for p in (out / "train").iterdir()) == before
    assert sorted(p.name for p in out.iterdir()) == ["train"]  # no marker written

    notes = tmp_path / "n"
    notes.mkdir()
    (notes / "notes.txt").write_text("mine\n")
    assert main(["demo", "--quick", "--out", str(notes), "--no-progress"]) == 1
    assert "did not write (notes.txt)" in capsys.readouterr().err
    assert sorted(p.name for p in notes.iterdir()) == ["notes.txt"]

    seen = []
    monkeypatch.setattr(
        demo_mod, "_run_demo", lambda out, quick, cache, progress, cfg: seen.append(cfg)
    )
    demo_mod.run_demo(notes, quick=True, progress=False, overwrite=True)
    assert seen[-1].train.overwrite_output_dir  # --overwrite: the demo writes there
    assert (notes / "notes.txt").read_text() == "mine\n"  # and deletes nothing of the user's


def test_demo_reruns_over_its_own_output_and_keeps_a_users_run(tmp_path):
    from astarpo.llm.stage1.table import ValueTable
    from astarpo.llm.toy.demo import DemoConfig, run_demo
    from astarpo.llm.toy.demo_output import MARKER

    assert not DemoConfig.make(quick=True).train.overwrite_output_dir
    out, cache = tmp_path / "d", tmp_path / "d" / "cache"  # a cache inside --out is allowed
    first = run_demo(out, cache_dir=cache, progress=False, config=_tiny_demo(out))
    assert (out / MARKER).is_file() and (out / "train" / "metrics.jsonl").is_file()
    second = run_demo(out, cache_dir=cache, progress=False, config=_tiny_demo(out))
    assert second["sft"]["cached"] and not first["sft"]["cached"]
    assert len(ValueTable.load(out / "v_star.jsonl")) == 4
    other = tmp_path / "e"
    before = _user_run(other / "train")
    with pytest.raises(FileExistsError, match=f"no {MARKER}"):
        run_demo(other, cache_dir=cache, progress=False, config=_tiny_demo(other))
    assert sorted(p.name for p in (other / "train").iterdir()) == before
