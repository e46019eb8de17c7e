"""Probe inputs (issue 61): options that cannot take effect, and inputs whose error named no
option, tried on every verb and on the Python API. Each is refused (or warned) naming the option
and the fix, before any model is loaded; nothing here trains longer than two toy steps."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from astarpo.cli import main
from astarpo.llm.toy.problems import addition_task

ROWS = addition_task(8, seed=0)


def _data(tmp_path: Path) -> str:
    path = tmp_path / "add.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return str(path)


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    """The one ``error:`` line of a refused command."""
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert len(lines) == 1, lines
    return lines[0]


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The error line of ``astarpo ARGV`` refused as a usage error (exit code 2, parser or
    verb)."""
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors
        code = e.code
    assert code == 2, argv
    return _error(capsys)


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if a verb gets as far as loading a model."""
    import astarpo.commands.eval as eval_command
    import astarpo.commands.train as train_command
    import astarpo.commands.value as value_command

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded: the input was not refused first")

    for module in (train_command, value_command, eval_command):
        monkeypatch.setattr(module, "load_model", refuse)


def _train(tmp_path: Path, *extra: str) -> list[str]:
    out = str(tmp_path / "run")
    return ["train", "--model", "toy", "--data", _data(tmp_path), "--out", out, *extra]


# ------------------------------------------------------- options that cannot take effect


@pytest.mark.parametrize(
    ("extra", "option", "switch"),
    [
        (["--stream-n-samples", "4"], "--stream-n-samples", "--stream-stage1 true"),
        (["--stream-beta1", "0.3", "--v-star", "v.jsonl"], "--stream-beta1", "--stream-stage1"),
        (["--stream-n-samples", "4", "--stream-stage1", "false"], "--stream-n-samples", ""),
        (["--refresh-n-samples", "256"], "--refresh-n-samples", "--refresh-every-steps K > 0"),
        (["--refresh-allocation", "adaptive"], "--refresh-allocation", "--refresh-every-steps"),
        (["--refresh-beta1", "1", "--refresh-every-steps", "0"], "--refresh-beta1", ""),
    ],
)
def test_an_extension_option_without_its_switch_is_refused_naming_both(
    tmp_path, capsys, no_model, extra, option, switch
):
    err = _refused(_train(tmp_path, *extra), capsys)
    assert f"error: {option} would be ignored" in err, err
    assert switch in err and f"drop {option}" in err, err
    assert not (tmp_path / "run").exists()


def test_an_extension_option_in_a_config_file_without_its_switch_is_refused(
    tmp_path, capsys, no_model
):
    f = tmp_path / "c.yaml"
    f.write_text("train:\n  stream_n_samples: 4\n")
    err = _refused(_train(tmp_path, "--config", str(f)), capsys)
    assert "--stream-n-samples would be ignored" in err and "--stream-stage1 true" in err
    f.write_text("train:\n  stream_stage1: true\n  stream_n_samples: 4\n  refresh_n_samples: 2\n")
    err = _refused(_train(tmp_path, "--config", str(f)), capsys)
    assert "--refresh-n-samples would be ignored" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--algo", "grpo", "--stream-stage1", "true"], "--stream-stage1 does not apply to"),
        (["--algo", "rloo", "--refresh-every-steps", "2"], "--refresh-every-steps does not"),
        (["--stream-stage1", "true", "--refresh-every-steps", "2"], "cannot be combined"),
        (["--refresh-every-steps", "-1"], "--refresh-every-steps must be >= 0"),
        (["--refresh-every-steps", "2", "--refresh-n-samples", "0"], "--refresh-n-samples must"),
        (["--stream-stage1", "true", "--stream-beta1", "0"], "--stream-beta1 must be a finite"),
        (["--stream-stage1", "true", "--temperature", "0"], "--temperature 0 (greedy)"),
        (["--refresh-every-steps", "2", "--lora-r", "4"], "not supported with LoRA (--lora-r"),
    ],
)
def test_extension_settings_that_cannot_run_are_refused_naming_the_options(
    tmp_path, capsys, no_model, extra, message
):
    err = _refused(_train(tmp_path, *extra), capsys)
    assert message in err, err


def test_a_refresh_that_can_never_run_is_warned_naming_the_options(caplog):
    from astarpo.llm.algorithms.astarpo import AStarPOConfig
    from astarpo.llm.training.refresh import ReferenceRefresh, RefreshConfig

    def warned(every: int, max_steps: int) -> list[str]:
        caplog.clear()
        host = SimpleNamespace(args=AStarPOConfig(max_steps=max_steps))
        with caplog.at_level(logging.WARNING, "astarpo.llm.training.refresh"):
            ReferenceRefresh(RefreshConfig(every_steps=every)).on_train_begin(host)
        return [r.getMessage() for r in caplog.records]

    for every, max_steps in [(100, 2), (2, 2)]:  # the first refresh would come after step K
        (message,) = warned(every, max_steps)
        assert "the reference refresh never runs" in message
        assert f"--refresh-every-steps) is {every}" in message
        assert f"--max-steps) {max_steps}" in message
    assert warned(1, 2) == [] and warned(25, 100) == []


def test_the_command_line_warns_of_a_refresh_that_never_runs(tmp_path, caplog):
    table = tmp_path / "v.jsonl"
    common = ["--model", "toy", "--data", _data(tmp_path), "--template", "none"]
    common += ["--reward", "exact_match", "--max-new-tokens", "2"]
    assert main(["value", *common, "--n-samples", "2", "--out", str(table), "--no-progress"]) == 0
    argv = ["train", *common, "--v-star", str(table), "--batch-size", "4", "--max-steps", "1"]
    argv += ["--progress", "false", "--report-to", "none", "--out", str(tmp_path / "run")]
    with caplog.at_level(logging.WARNING, "astarpo.llm.training.refresh"):
        assert main([*argv, "--refresh-every-steps", "100"]) == 0
    (warning,) = [r.getMessage() for r in caplog.records if "refresh never" in r.getMessage()]
    assert "--refresh-every-steps) is 100" in warning and "--max-steps) 1" in warning


# ------------------------------------------------------------- errors that named no option


VERBS = {
    "train": lambda d, out: ["train", "--out", str(out / "run")],
    "value": lambda d, out: ["value", "--out", str(out / "v.jsonl")],
    "eval": lambda d, out: ["eval", "--out", str(out / "e.json")],
}


def _verb(verb: str, tmp_path: Path, *extra: str) -> list[str]:
    data = _data(tmp_path)
    return [*VERBS[verb](data, tmp_path), "--model", "toy", "--data", data, *extra]


@pytest.mark.parametrize("verb", list(VERBS))
@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1", "soon"])
def test_a_bad_math_verify_timeout_names_the_flag(tmp_path, capsys, no_model, verb, value):
    err = _refused(_verb(verb, tmp_path, "--math-verify-timeout", value), capsys)
    assert "argument --math-verify-timeout" in err and repr(value) in err, err
    assert "seconds" in err


def test_math_verify_refuses_a_timeout_that_is_not_a_finite_positive_number():
    from astarpo.llm.rewards.math_verify import MathVerifyReward

    for bad in (math.nan, math.inf, 0.0, -1.0, "5"):
        with pytest.raises(ValueError, match="timeout must be a finite number of seconds > 0"):
            MathVerifyReward(timeout=bad)
    assert MathVerifyReward(timeout=0.5).timeout == 0.5  # no helper started by construction


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize("verb", list(VERBS))
def test_an_out_under_proc_is_refused_naming_the_folder_not_an_errno(
    tmp_path, capsys, no_model, verb
):
    argv = _verb(verb, tmp_path)
    i = argv.index("--out") + 1
    argv[i] = "/proc/astarpo-probe" if verb == "train" else "/proc/astarpo-probe/v.json"
    err = _refused(argv, capsys)
    assert "nothing can be created in the folder /proc" in err, err
    assert "[Errno" not in err and "choose a writable path" in err


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_the_trainer_names_an_output_dir_it_cannot_create(tokenizer):
    from toy_setup import toy_trainer

    from astarpo.llm.training.run_dir import RunDirError

    with pytest.raises(RunDirError, match="output_dir '/proc/astarpo-probe' cannot be created"):
        toy_trainer(tokenizer, "/proc/astarpo-probe").train()


@pytest.mark.parametrize("verb", list(VERBS))
@pytest.mark.parametrize("device", ["tpu", "cuda:x", "gpu"])
def test_a_device_that_is_no_device_is_named_with_the_choices(
    tmp_path, capsys, monkeypatch, verb, device
):
    import astarpo.commands.common as common

    monkeypatch.setattr(common, "load_pretrained_model", _no_load)
    err = _refused(_verb(verb, tmp_path, "--device", device), capsys)
    assert "--device" in err and repr(device)[1:-1] in err, err  # the flag and the value
    assert "'auto', 'cpu', 'cuda' or 'cuda:N'" in err, err
    assert "Expected one of" not in err  # torch's list of its device types


def _no_load(*args, **kwargs):
    raise AssertionError("the model was loaded before the device was checked")


def test_check_device_names_a_device_string_that_is_no_device():
    from astarpo.commands.common import check_device

    for bad in ("tpu", "cuda:x", "", "cpu:0", "mps"):
        with pytest.raises(SystemExit, match="not a device; use 'auto', 'cpu', 'cuda' or 'cuda:N'"):
            check_device(bad)
    check_device("cpu")
    check_device("auto")


def test_mixed_precision_fp8_is_refused_before_any_work_naming_the_choices(
    tmp_path, capsys, no_model
):
    from astarpo.llm.algorithms.astarpo import AStarPOConfig

    allowed = "'auto', 'bf16' or 'no', got 'fp8'"
    err = _refused(_train(tmp_path, "--mixed-precision", "fp8"), capsys)
    assert f"--mixed-precision must be {allowed}" in err, err
    f = tmp_path / "c.yaml"
    f.write_text("train:\n  mixed_precision: fp8\n")
    err = _refused(_train(tmp_path, "--config", str(f)), capsys)
    assert f"--mixed-precision must be {allowed}" in err, err
    with pytest.raises(ValueError, match=f"mixed_precision must be {allowed}"):
        AStarPOConfig(mixed_precision="fp8")


# ---------------------------------------------------------- a stop names the next command


def test_a_stopped_train_names_the_command_that_continues_it():
    from astarpo.commands.train import resume_command

    argv = ["train", "--out", "runs/a b", "--overwrite", "--stream-stage1", "true"]
    assert resume_command(argv, False) == (
        "astarpo train --out 'runs/a b' --stream-stage1 true --resume"
    )  # --overwrite would delete what it continues
    assert resume_command([*argv, "--resume"], False).count("--resume") == 1
    for unknown in (resume_command(None, False), resume_command(argv, True)):  # torchrun
        assert unknown == "rerun the same command with --resume (without --overwrite)."
