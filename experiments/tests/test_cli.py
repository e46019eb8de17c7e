"""``python -m experiments.NAME``: the list, the flags made from a study's config, ``--config``
sections, ``--resume``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from astarpo import flag_of
from experiments.harness.cli import main
from experiments.harness.config import flat_fields
from experiments.registry import STUDIES

ROOT = Path(__file__).resolve().parents[2]


def test_python_m_experiments_lists_every_study_with_one_line():
    out = subprocess.run(
        [sys.executable, "-m", "experiments"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert [line.split(":")[0] for line in out] == [
        f"python -m {s.package}" for s in STUDIES.values()
    ]
    assert all(len(line) > 40 for line in out)


@pytest.mark.parametrize("name", list(STUDIES))
def test_every_study_has_its_module_entry(name):
    package = STUDIES[name].package
    main_py = ROOT / Path(*package.split(".")) / "__main__.py"
    assert f'main("{name}")' in main_py.read_text()


@pytest.mark.parametrize("name", list(STUDIES))
def test_every_config_field_is_a_flag_with_its_help_and_default(name, capsys):
    with pytest.raises(SystemExit):
        main(name, ["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for f in flat_fields(STUDIES[name].config).values():
        assert flag_of(f.name) in text, f.name
        assert f.metadata.get("help"), f"{name}: setting {f.name} has no help"
    assert "(default 1)" in text  # --threads


def test_list_values_and_json_are_checked(tmp_path, capsys):
    out = ["--out", str(tmp_path)]
    with pytest.raises(SystemExit) as stop:  # argparse's usage error: exit code 2
        main("efficiency", [*out, "--target-fractions", "0.5,half"])
    assert stop.value.code == 2
    assert "expected comma-separated numbers" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main("efficiency", [*out, "--model-overrides", "[1]"])
    assert "expected a JSON object" in capsys.readouterr().err


def test_a_bad_list_in_a_config_file_names_the_option(tmp_path, capsys):
    f = tmp_path / "c.yaml"
    f.write_text("bench:\n  lr_grid: [1.0e-4, fast]\n")
    assert main("efficiency", ["--config", str(f), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"--config {f}: lr_grid: expected comma-separated numbers (e.g. 1e-4,3e-4)" in err


def _fake_efficiency_run(monkeypatch, tmp_path):
    import experiments.efficiency.run as run_mod

    seen: dict = {}

    def fake_run(cfg, out_dir, overwrite=False, progress=True, resume=False):
        seen.update(cfg=cfg, overwrite=overwrite, resume=resume)
        (tmp_path / "bench.md").write_text("x\n")

    monkeypatch.setattr(run_mod, "run", fake_run)
    return seen


def test_a_config_file_section_per_study(tmp_path, monkeypatch, capsys):
    seen = _fake_efficiency_run(monkeypatch, tmp_path)
    f = tmp_path / "c.yaml"
    f.write_text("bench:\n  seeds: 4\nstudy:\n  k: 8\n")
    assert main("efficiency", ["--config", str(f), "--out", str(tmp_path)]) == 0
    assert seen["cfg"].seeds == 4
    assert main("efficiency", ["--config", str(f), "--out", str(tmp_path), "--seeds", "5"]) == 0
    assert seen["cfg"].seeds == 5  # the flag wins
    f.write_text("bench:\n  k: 8\n")
    assert main("efficiency", ["--config", str(f), "--out", str(tmp_path)]) == 2
    assert "unknown key 'k'" in capsys.readouterr().err


def test_the_gpu_config_is_a_valid_efficiency_protocol(tmp_path, monkeypatch):
    seen = _fake_efficiency_run(monkeypatch, tmp_path)
    gpu = str(ROOT / "experiments" / "efficiency" / "gpu.yaml")
    assert main("efficiency", ["--config", gpu, "--out", str(tmp_path)]) == 0
    cfg = seen["cfg"]
    assert (cfg.train.device, cfg.train.mixed_precision, cfg.seeds) == ("cuda", "bf16", 3)
    assert cfg.model_overrides["hidden_size"] == 512 and cfg.lr_grid == (1e-5, 3e-5, 1e-4)


def test_resume_reaches_the_study_and_excludes_overwrite(tmp_path, monkeypatch, capsys):
    seen = _fake_efficiency_run(monkeypatch, tmp_path)
    assert main("efficiency", ["--quick", "--out", str(tmp_path), "--resume"]) == 0
    assert (seen["overwrite"], seen["resume"]) == (False, True)
    with pytest.raises(SystemExit):
        main("efficiency", ["--out", str(tmp_path), "--resume", "--overwrite"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_output_paths_are_checked_before_any_work(tmp_path, capsys):
    afile = tmp_path / "a_file"
    afile.write_text("x")
    assert main("efficiency", ["--quick", "--out", str(afile / "b")]) == 2
    assert f"--out {afile / 'b'}: {afile}" in capsys.readouterr().err
    assert main("efficiency", ["--cache-dir", str(afile), "--out", str(tmp_path / "b")]) == 2
    assert "--cache-dir" in capsys.readouterr().err
    assert afile.read_text() == "x" and not (tmp_path / "b").exists()
