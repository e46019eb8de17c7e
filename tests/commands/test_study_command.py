"""``astarpo study``: the list, the flags made from a study's config, ``--config`` sections."""

from __future__ import annotations

import dataclasses

import pytest

from astarpo.cli import build_parser, main
from astarpo.commands.fields import flag_of
from astarpo.studies.registry import STUDIES


def test_list_names_every_study_with_one_line(capsys):
    assert main(["study", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == list(STUDIES)
    assert all(len(line) > 40 for line in lines)
    assert main(["study"]) == 2
    assert f"name a study ({', '.join(STUDIES)})" in capsys.readouterr().err


@pytest.mark.parametrize("name", list(STUDIES))
def test_every_config_field_is_a_flag_with_its_help_and_default(name, capsys):
    with pytest.raises(SystemExit):
        main(["study", name, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for f in dataclasses.fields(STUDIES[name].config):
        assert flag_of(f.name) in text, f.name
        assert f.metadata.get("help"), f"{name}: field {f.name} has no help"
    assert "(default 1)" in text  # --threads


def test_bench_is_study_efficiency():
    parser = build_parser(["study", "bench"])
    sub = next(a for a in parser._actions if hasattr(a, "choices") and a.choices)
    study = next(a for a in sub.choices["study"]._actions if hasattr(a, "choices") and a.choices)
    flags = {o for a in study.choices["efficiency"]._actions for o in a.option_strings}
    assert flags == {o for a in sub.choices["bench"]._actions for o in a.option_strings}


def test_list_values_and_json_are_checked(tmp_path, capsys):
    out = ["--out", str(tmp_path)]
    with pytest.raises(SystemExit):
        main(["study", "efficiency", *out, "--target-fractions", "0.5,half"])
    assert "expected comma-separated numbers" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bench", *out, "--model-overrides", "[1]"])
    assert "expected a JSON object" in capsys.readouterr().err


def test_a_config_file_section_per_study(tmp_path, monkeypatch, capsys):
    import astarpo.studies.efficiency.run as run_mod

    seen = {}

    def fake_run(cfg, out_dir, overwrite=False, progress=True, resume=False):
        seen["cfg"] = cfg
        (tmp_path / "bench.md").write_text("x\n")

    monkeypatch.setattr(run_mod, "run", fake_run)
    f = tmp_path / "c.yaml"
    f.write_text("bench:\n  seeds: 4\nstudy:\n  k: 8\n")
    assert main(["study", "efficiency", "--config", str(f), "--out", str(tmp_path)]) == 0
    assert seen["cfg"].seeds == 4
    assert main(["bench", "--config", str(f), "--out", str(tmp_path), "--seeds", "5"]) == 0
    assert seen["cfg"].seeds == 5  # the flag wins
    f.write_text("bench:\n  k: 8\n")
    assert main(["bench", "--config", str(f), "--out", str(tmp_path)]) == 2
    assert "unknown key 'k': not an option of `astarpo bench`" in capsys.readouterr().err


def test_the_gpu_preset_is_a_valid_efficiency_protocol(tmp_path, monkeypatch):
    import astarpo.studies.efficiency.run as run_mod

    seen = {}

    def fake_run(cfg, out_dir, overwrite=False, progress=True, resume=False):
        seen["cfg"] = cfg
        (tmp_path / "bench.md").write_text("x\n")

    monkeypatch.setattr(run_mod, "run", fake_run)
    assert main(["bench", "--config", "gpu", "--out", str(tmp_path)]) == 0
    cfg = seen["cfg"]
    assert (cfg.device, cfg.mixed_precision, cfg.seeds) == ("cuda", "bf16", 3)
    assert cfg.model_overrides["hidden_size"] == 512 and cfg.lr_grid == (1e-5, 3e-5, 1e-4)


def test_resume_reaches_the_study_and_excludes_overwrite(tmp_path, monkeypatch, capsys):
    import astarpo.studies.efficiency.run as run_mod

    seen = {}

    def fake_run(cfg, out_dir, overwrite=False, progress=True, resume=False):
        seen.update(overwrite=overwrite, resume=resume)
        (tmp_path / "bench.md").write_text("x\n")

    monkeypatch.setattr(run_mod, "run", fake_run)
    assert main(["bench", "--quick", "--out", str(tmp_path), "--resume"]) == 0
    assert seen == {"overwrite": False, "resume": True}
    with pytest.raises(SystemExit):
        main(["bench", "--out", str(tmp_path), "--resume", "--overwrite"])
    assert "not allowed with argument" in capsys.readouterr().err
