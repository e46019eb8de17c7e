"""Every output path a verb writes is checked before any work starts (one helper,
:func:`astarpo.commands.paths.check_output`), and an export that fails half-way (a full disk)
leaves nothing that blocks the rerun."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from astarpo.cli import main
from astarpo.commands.paths import check_output
from astarpo.llm.toy.problems import addition_task

ROWS = addition_task(6, seed=0)


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert len(lines) == 1, lines
    return lines[0]


def _data(tmp_path: Path) -> Path:
    path = tmp_path / "add.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def _no_work(*args, **kwargs):
    raise AssertionError("the verb started its work before checking its output paths")


def test_check_output_refuses_what_cannot_be_written(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    folder = tmp_path / "d"
    folder.mkdir()
    cases = [
        (afile / "exp", dict(folder=True), f"{afile} is a file, not a folder"),
        (afile / "a" / "b.jsonl", dict(folder=False), f"{afile} is a file, not a folder"),
        (afile, dict(folder=True), "is a file; give a folder"),
        (folder, dict(folder=False), "is a folder; give a file name in it"),
        (folder, dict(folder=True, new=True), "exists; choose a new folder"),
    ]
    for path, kind, message in cases:
        with pytest.raises(SystemExit, match=message) as e:
            check_output(str(path), "--flag", **kind)
        assert str(e.value).startswith(f"error: --flag {path}")
    for fine, kind in [
        (tmp_path / "new" / "deeper" / "v.jsonl", dict(folder=False)),
        (tmp_path / "new" / "exp", dict(folder=True, new=True)),
        (folder, dict(folder=True)),
        (None, dict(folder=True)),
    ]:
        check_output(fine, "--flag", **kind)
    assert afile.read_text() == "mine\n" and not (tmp_path / "new").exists()  # nothing made


def test_every_verb_checks_its_output_paths_before_any_work(tmp_path, capsys, monkeypatch):
    import astarpo.commands.theory as theory_command
    import astarpo.commands.train as train_command
    import astarpo.commands.value as value_command
    import astarpo.llm.toy.demo as demo
    import experiments.efficiency.run as bench_run

    for module, name in [
        (value_command, "load_model"),
        (value_command, "load_tokenizer"),
        (train_command, "load_model"),
        (demo, "run_demo"),
        (bench_run, "run"),
        (theory_command, "run_one"),
    ]:
        monkeypatch.setattr(module, name, _no_work)
    afile = tmp_path / "afile"
    afile.write_text("x")
    data = str(_data(tmp_path))
    value = ["value", "--model", "toy", "--data", data, "--template", "none"]
    commands = [
        ([*value, "--out", str(afile / "v.jsonl")], f"--out {afile / 'v.jsonl'}"),
        ([*value, "--out", str(tmp_path)], f"--out {tmp_path} is a folder"),
        (
            [*value, "--out", str(tmp_path / "v.jsonl"), "--export", str(afile / "exp")],
            f"--export {afile / 'exp'}: {afile} is a file",
        ),
        (
            [*value, "--out", str(tmp_path / "v.jsonl"), "--export", str(tmp_path)],
            f"--export {tmp_path} exists",
        ),
        (["train", "--model", "toy", "--data", data, "--out", str(afile)], f"--out {afile} is a"),
        (["demo", "--quick", "--out", str(afile)], f"--out {afile} is a file"),
        (["demo", "--cache-dir", str(afile), "--out", str(tmp_path / "d")], "--cache-dir"),
        (["theory", "horizon", "--quick", "--out", str(afile)], f"--out {afile} is a file"),
    ]
    for argv, message in commands:
        assert main(argv) == 2, argv
        err = _error(capsys)
        assert message in err, (argv, err)
    assert not (tmp_path / "v.jsonl").exists() and afile.read_text() == "x"


def test_sft_cache_that_is_a_file_is_refused_before_training(tokenizer, tmp_path, monkeypatch):
    from astarpo.llm.toy import sft as sft_module

    monkeypatch.setattr(sft_module, "sft", _no_work)
    afile = tmp_path / "afile"
    afile.write_text("x")
    from toy_setup import make_tiny_model

    for cache in (afile, afile / "below"):
        with pytest.raises(NotADirectoryError, match=f"SFT cache folder '{cache}' cannot be made"):
            sft_module.cached_sft(
                make_tiny_model(tokenizer), tokenizer, ROWS, sft_module.SFTConfig(1, 2, 1e-3), cache
            )


def _full_disk_export(monkeypatch):
    """``Dataset.save_to_disk`` that writes part of the folder, then finds the disk full."""
    import datasets

    def full(self, path, *args, **kwargs):
        Path(path).mkdir(parents=True)
        (Path(path) / "data-00000-of-00001.arrow").write_bytes(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(datasets.Dataset, "save_to_disk", full)


def test_an_export_on_a_full_disk_leaves_nothing_that_blocks_the_rerun(tmp_path, monkeypatch):
    import numpy as np

    from astarpo.llm.stage1.rows import make_row
    from astarpo.llm.stage1.table import ValueTable

    table = ValueTable(
        [make_row(r["prompt"], np.array([1.0, 0.0]), 0.5, {}, r["answer"]) for r in ROWS]
    )
    out = tmp_path / "exp"
    with monkeypatch.context() as m:
        _full_disk_export(m)
        with pytest.raises(OSError, match=f"no space left on device while exporting .* to {out}"):
            table.export(out)
    assert list(tmp_path.iterdir()) == []  # neither the folder nor a temporary sibling
    table.export(out)  # the rerun
    assert len(ValueTable.load(out)) == len(ROWS)


def test_cli_export_on_a_full_disk_names_the_path_and_the_rerun_works(
    tmp_path, capsys, monkeypatch
):
    data = str(_data(tmp_path))
    out, exp = tmp_path / "v.jsonl", tmp_path / "exp"
    argv = ["value", "--model", "toy", "--data", data, "--template", "none", "--out", str(out),
            "--export", str(exp), "--n-samples", "2", "--max-new-tokens", "3", "--reward",
            "exact_match", "--no-progress"]  # fmt: skip
    with monkeypatch.context() as m:
        _full_disk_export(m)
        assert main(argv) == 1
        err = _error(capsys)
    assert f"no space left on device while exporting the V* table to {exp}" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["add.jsonl", "v.jsonl", "v.jsonl.lock"]
    assert main(argv) == 0  # Stage 1 resumes from v.jsonl; the export is written now
    assert (exp / "state.json").is_file()
