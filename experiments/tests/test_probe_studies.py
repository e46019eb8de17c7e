"""Probes of the studies as a new user tries them (issue "Reliability"): a study never deletes a
finished run it could read back, refuses a changed setting on ``--resume`` by name, resumes
wherever its folder is moved, ``--overwrite`` removes only what it wrote (and names what it
kept), one study at a time holds an ``--out``; options that cannot take effect are refused by
name; a damaged file or a folder that is not a ladder is named with the fix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from astarpo import doc_field
from experiments.harness import runner as runner_mod
from experiments.harness.cli import main
from experiments.harness.config import StudyConfig
from experiments.harness.ladder_build import read_ladder
from experiments.harness.ladder_sets import read_prompts
from experiments.harness.output import OutputDir, open_output
from experiments.harness.runner import Runner

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Tiny(StudyConfig):
    """A study's settings, small."""

    learning_rate: float = doc_field(3e-5, "Rate of every run.")
    workers: int = doc_field(1, "Runs at once.")


def echo(spec: dict) -> dict:
    """A run's entry for these probes: the spec back."""
    (Path(spec["out"]) / "metrics.jsonl").write_text("{}\n")  # a file the run writes
    return {"spec": spec, "steps": 1}


CALLS: list[str] = []


def _in_process(cmd, cwd, env):
    """``run_process`` in this process (no child), counted."""
    CALLS.append(str(cwd))
    old = os.getcwd()
    os.chdir(cwd)
    try:
        runner_mod.main(cmd[-2:])
    finally:
        os.chdir(old)
    return 0, 1.0, 1.0


@pytest.fixture
def in_process(monkeypatch):
    monkeypatch.setattr(runner_mod, "run_process", _in_process)
    CALLS.clear()
    return CALLS


def _study(out: Path, cfg: Tiny, **kw) -> Runner:
    output = open_output(out, "t", (), cfg, kw.pop("overwrite", False), kw.get("resume", False))
    return Runner(output, say=lambda *a: None, **kw)


SPEC = {"entry": "test_probe_studies:echo"}


def test_resume_with_a_changed_setting_is_refused_by_name_and_deletes_nothing(tmp_path, in_process):
    out = tmp_path / "R3"
    _study(out, Tiny()).run("refresh0-seed0", {**SPEC, "lr": 3e-5})
    with pytest.raises(ValueError, match=r"--learning-rate 3e-05 then, 0\.0001 now") as e:
        _study(out, Tiny(learning_rate=1e-4), resume=True)
    assert "--overwrite" in str(e.value) and "Nothing was changed" in str(e.value)
    assert (out / "runs" / "refresh0-seed0" / "result.json").is_file()
    runner = _study(out, Tiny(workers=4), resume=True)  # how many at once: no setting of a run
    assert runner.run("refresh0-seed0", {**SPEC, "lr": 3e-5})["process"]["resumed"]
    assert len(in_process) == 1


def test_a_finished_run_of_another_spec_is_kept_aside_not_deleted(tmp_path, in_process):
    out = tmp_path / "R"
    _study(out, Tiny()).run("a", {**SPEC, "x": 1})
    _study(out, Tiny(), resume=True).run("a", {**SPEC, "x": 2})
    old = json.loads((out / "runs" / "a.replaced" / "result.json").read_text())
    assert old["spec"]["x"] == 1 and len(in_process) == 2
    assert "runs/a.replaced" in OutputDir(out, "t").recorded()


def test_a_moved_study_folder_reads_its_finished_runs_back(tmp_path, in_process):
    first = tmp_path / "R4"
    (first / "stage1.jsonl").parent.mkdir(parents=True)
    spec = {**SPEC, "values": str(first / "stage1.jsonl"), "paths": ["values"]}
    _study(first, Tiny()).run("a", spec)
    moved = tmp_path / "elsewhere" / "R4"
    moved.parent.mkdir()
    shutil.move(first, moved)
    spec = {**spec, "values": str(moved / "stage1.jsonl")}
    res = _study(moved, Tiny(), resume=True).run("a", spec)
    assert res["process"]["resumed"] and len(in_process) == 1


def test_overwrite_deletes_only_what_the_study_wrote_and_names_what_it_kept(
    tmp_path, in_process, capsys
):
    out = tmp_path / "R5"
    runner = _study(out, Tiny())
    runner.run("refresh0-seed0", SPEC)
    ladder = runner.output.record("ladder")
    (ladder / "reference").mkdir(parents=True)
    (ladder / "reference" / "model.safetensors").write_text("w")
    runner.output.seal()  # the study finished writing its folders
    (out / "runs" / "refresh0-seed0" / "my_notes.txt").write_text("mine")
    (ladder / "my_ladder_notes.txt").write_text("mine")
    (out / "notes.txt").write_text("mine")
    _study(out, Tiny(), overwrite=True)
    err = capsys.readouterr().err
    assert "kept 2 files the study did not write" in err
    assert "ladder/my_ladder_notes.txt" in err and "runs/refresh0-seed0/my_notes.txt" in err
    for mine in ("runs/refresh0-seed0/my_notes.txt", "ladder/my_ladder_notes.txt", "notes.txt"):
        assert (out / mine).read_text() == "mine"
    for written in ("runs/refresh0-seed0/result.json", "runs/refresh0-seed0/metrics.jsonl"):
        assert not (out / written).exists()
    assert not (ladder / "reference").exists()


def test_a_study_holds_its_out_and_a_second_one_or_a_resume_is_refused(tmp_path):
    out = tmp_path / "R"
    code = (
        "import sys, time; from experiments.harness.output import OutputDir; "
        f"OutputDir({str(out)!r}, 'refresh').lock(); print('locked', flush=True); time.sleep(60)"
    )
    first = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "locked"
        for resume in (False, True):
            with pytest.raises(
                RuntimeError, match=rf"in use by a study that is still running \(pid {first.pid}"
            ):
                open_output(out, "adaptive_n", (), Tiny(), False, resume)
        assert first.poll() is None  # the first one runs on
    finally:
        first.kill()
        first.wait()
    open_output(out, "adaptive_n", (), Tiny(), False, False)  # its lock ended with it


def test_a_refresh_rule_past_the_runs_steps_is_refused_by_name(tmp_path, capsys):
    argv = ["--refresh-every", "0,1000", "--seeds", "1", "--out", str(tmp_path / "R")]
    assert main("refresh", argv) == 2
    err = capsys.readouterr().err
    assert "--refresh-every 1000 would never refresh" in err and "--max-steps" in err
    assert not (tmp_path / "R").exists()


def test_refresh_builds_its_ladder_on_the_bins_asked_and_refuses_others_before_any_work(
    tmp_path, capsys
):
    from experiments.refresh.config import RefreshConfig
    from experiments.refresh.run import ladder_to_build

    cfg = RefreshConfig.from_dict({"bins": ("-3:-4",), "task": "scratchpad", "max_new_tokens": 78})
    assert ladder_to_build(cfg).bins == ("-3:-4",)
    assert main("refresh", ["--bins=-6:-30", "--quick", "--out", str(tmp_path / "R")]) == 1
    err = capsys.readouterr().err
    assert "--bins [-6,-30)" in err and "--ladder DIR" in err
    assert not (tmp_path / "R").exists()


def fake_ladder(folder: Path, k: int) -> None:
    """A ladder folder of two bins (no reference) whose samples are Bernoulli(v_ref) draws."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    prompts, samples = [], []
    for b, v in {"[0,-1)": 0.5, "[-1,-2)": 0.03}.items():
        for i in range(40):
            row = {"bin": b, "split": "train" if i < 20 else "test", "prompt": f"{b}{i}="}
            row.update(answer="a", gold_response="a", v_ref=v)
            prompts.append(json.dumps(row) + "\n")
            bits = "".join("1" if x else "0" for x in rng.random(k) < v)
            samples.append(json.dumps({**row, "k": k, "solved": bits}) + "\n")
    (folder / "ladder_prompts.jsonl").write_text("".join(prompts))
    (folder / "ladder_samples.jsonl").write_text("".join(samples))
    (folder / "ladder.json").write_text(json.dumps({"config": {"k": k}, "bins": {}}))


def _adaptive(folder: Path, **fields):
    from experiments.adaptive_n.config import AdaptiveNConfig

    small = dict(k=16, fixed=(2, 4, 8, 16), adaptive=(4, 8), cap=16)
    return AdaptiveNConfig.from_dict({"ladder": str(folder), **small, **fields})


def test_adaptive_n_reads_the_bins_asked_of_a_ladder_and_records_them(tmp_path):
    from experiments.adaptive_n.run import run

    fake_ladder(tmp_path / "L", k=16)
    res = run(_adaptive(tmp_path / "L", bins=("-1:-2",)), tmp_path / "A", progress=False)
    assert res["config"]["bins"] == ["[-1,-2)"]
    assert set(res["summary"]["N=8"]) == {"[-1,-2)", "all"}
    with pytest.raises(ValueError, match=r"--bins: the ladder .* holds no bin \[-3,-4\); its bins"):
        run(_adaptive(tmp_path / "L", bins=("-3:-4",)), tmp_path / "B", progress=False)


def test_adaptive_n_on_a_ladder_of_fewer_samples_names_the_options(tmp_path):
    from experiments.adaptive_n.config import AdaptiveNConfig
    from experiments.adaptive_n.run import run

    fake_ladder(tmp_path / "L", k=16)
    cfg = AdaptiveNConfig.from_dict({"ladder": str(tmp_path / "L")})  # N up to 64
    with pytest.raises(ValueError, match=r"holds 16 samples per prompt .* --fixed 64.*--cap 64"):
        run(cfg, tmp_path / "A", progress=False)


def test_a_mapping_in_a_config_file_is_a_json_object_option(tmp_path, captured_run):
    seen = captured_run("experiments.efficiency", "bench", "report")
    (tmp_path / "o").mkdir()
    for text in ("model_overrides: {hidden_size: 32}\n", "bench:\n  model_overrides: {n: 2}\n"):
        f = tmp_path / "c.yaml"
        f.write_text(text)
        assert main("efficiency", ["--config", str(f), "--out", str(tmp_path / "o")]) == 0
        assert seen["cfg"].model_overrides == yaml_mapping(text)


def yaml_mapping(text: str) -> dict:
    import yaml

    data = yaml.safe_load(text)
    return data.get("bench", data)["model_overrides"]


def test_a_truncated_result_or_ladder_file_is_named(tmp_path, capsys):
    out = tmp_path / "R"
    out.mkdir()
    (out / "refresh.json").write_text('{"config": {"bins": ["[0')
    assert main("refresh", ["--report-only", "--out", str(out)]) == 1
    assert f"{out / 'refresh.json'} is not JSON" in capsys.readouterr().err
    fake_ladder(tmp_path / "L", k=16)
    prompts = tmp_path / "L" / "ladder_prompts.jsonl"
    prompts.write_text(prompts.read_text()[:-40])
    with pytest.raises(ValueError, match=rf"{prompts}: line 80 is not JSON"):
        read_prompts(prompts)


@pytest.mark.parametrize("kind", ["missing", "not a ladder"])
def test_ladder_at_a_missing_or_non_ladder_folder_is_named_with_the_fix(tmp_path, kind, capsys):
    folder = tmp_path / "L"
    if kind == "not a ladder":
        folder.mkdir()
        (folder / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="--ladder") as e:
        read_ladder(folder)
    assert "python -m experiments.ladder" in str(e.value)
    argv = ["--ladder", str(folder), "--quick", "--out", str(tmp_path / "R")]
    assert main("refresh", argv) == 1
    err = capsys.readouterr().err
    assert f"--ladder {folder}" in err and "Errno" not in err
    assert not (tmp_path / "R").exists()  # refused before the study touched its --out


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--device", "tpu", "--device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got 'tpu'"),
        ("--mixed-precision", "fp8", "--mixed-precision must be 'auto', 'bf16' or 'no'"),
        ("--reference-target", "1.5", "--reference-target must be in (0, 1)"),
    ],
)
def test_a_setting_a_library_config_refuses_is_named_by_its_flag_before_any_work(
    tmp_path, flag, value, says, capsys
):
    assert main("two-beta", [flag, value, "--out", str(tmp_path / "R")]) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "R").exists()
