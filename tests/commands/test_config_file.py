"""``--config FILE`` on the verbs, the packaged paper preset, and the V* table's provenance
checked by the Python API (model, rewards, sampling, the subset rule)."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes import FakeGenerator
from toy_setup import make_tiny_model, quick_config, toy_trainer

from astarpo.cli import CONFIG_VERBS, VERBS, build_parser, main
from astarpo.commands.config_file import (
    MAX_DEPTH,
    MAX_VALUES,
    PRESETS_DIR,
    apply_config_file,
    config_values,
    presets,
    resolve_config_path,
)
from astarpo.commands.console import shown
from astarpo.llm import AStarPOConfig, AStarPOTrainer
from astarpo.llm.rewards.builtin import exact_match_reward
from astarpo.llm.stage1.config import Stage1Config
from astarpo.llm.stage1.estimate import estimate_values
from astarpo.llm.stage1.rows import ValueTableError
from astarpo.llm.stage1.table import MissingPromptError, ValueTable
from astarpo.llm.toy.problems import addition_task

ROOT = Path(__file__).parents[2]
ROWS = addition_task(8, seed=0)


def write_data(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def cli(*args, cwd):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-m", "astarpo", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=cwd,
    )
    return out.returncode, out.stdout, out.stderr


# ------------------------------------------------------------------------- the config file
def test_the_paper_preset_is_packaged_and_holds_the_official_settings():
    assert "paper" in presets()
    train = config_values(PRESETS_DIR / "paper.yaml", "train")
    value = config_values(PRESETS_DIR / "paper.yaml", "value")
    assert value["n_samples"] == 8 and value["beta1"] == 0.5
    assert train["beta2"] == 1e-3 and train["learning_rate"] == 1e-6
    assert train["batch_size"] == 256 and train["minibatches"] == 2
    assert train["entropy_coef"] == 1e-3 and train["max_grad_norm"] == 1.0
    assert train["max_new_tokens"] == value["max_new_tokens"] == 1024
    assert train["max_prompt_tokens"] == value["max_prompt_tokens"] == 256
    assert train["temperature"] == value["temperature"] == 1.0


def test_sections_name_only_verbs():
    from astarpo.commands import config_file

    assert set(config_file._VERBS) == set(VERBS)
    assert set(CONFIG_VERBS) <= set(VERBS)


def toy_value(d, flags, *extra):
    """``astarpo value`` of the toy model on ``flags``' data into ``d/v.jsonl`` (2 samples of 3
    tokens per prompt); ``extra``: more flags."""
    value = ["--reward", "exact_match", "--out", str(d / "v.jsonl"), "--n-samples", "2"]
    return cli("value", *flags, *value, "--max-new-tokens", "3", "--no-progress", *extra, cwd=d)


def toy_train(d, flags, v_star, out, *extra):
    """One quiet step of ``astarpo train`` of the toy model on ``flags``' data and the V* table
    ``v_star`` into ``out`` (a batch of 2, 3 new tokens); ``extra``: more flags."""
    given = ["--reward", "exact_match", "--v-star", str(v_star), "--out", str(out)]
    short = ["--max-steps", "1", "--max-new-tokens", "3", "--batch-size", "2"]
    quiet = ["--progress", "false", "--report-to", "none"]
    return cli("train", *flags, *given, *short, *quiet, *extra, cwd=d)


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """A prompt file and a V* table made with the toy model (CLI Stage 1)."""
    d = tmp_path_factory.mktemp("cfg")
    rows = [{"problem": r["problem"], "answer": r["answer"]} for r in addition_task(4, seed=0)]
    data = write_data(d / "p.jsonl", rows)
    flags = ["--model", "toy", "--data", str(data), "--template", "none", "--device", "cpu"]
    code, _, err = toy_value(d, flags)
    assert code == 0, err
    return d, flags


@pytest.mark.e2e
def test_paper_preset_trains_and_a_flag_overrides_the_file(toy_run):
    d, flags = toy_run
    # The toy model has 64 positions: its budget overrides the preset's 1024 tokens, and the
    # batch the preset's 256 prompts (a flag wins over the file).
    code, _, err = toy_train(d, flags, d / "v.jsonl", d / "run", "--config", "configs/paper.yaml")
    assert code == 0, err
    cfg = json.loads((d / "run" / "run_config.json").read_text())["config"]
    assert cfg["max_new_tokens"] == 3 and cfg["batch_size"] == 2  # the flags
    assert cfg["learning_rate"] == 1e-6 and cfg["entropy_coef"] == 1e-3  # the file
    assert cfg["minibatches"] == 2 and cfg["beta2"] == 1e-3
    # run_config.json passed back as --config repeats the run's settings.
    code, _, err = cli(
        "train",
        "--config",
        str(d / "run" / "run_config.json"),
        *flags,
        "--v-star",
        str(d / "v.jsonl"),
        "--out",
        str(d / "run2"),
        cwd=d,
    )
    assert code == 0, err
    again = json.loads((d / "run2" / "run_config.json").read_text())["config"]
    assert {k: v for k, v in again.items() if k != "output_dir"} == {
        k: v for k, v in cfg.items() if k != "output_dir"
    }


@pytest.mark.e2e
def test_an_unknown_key_is_refused_naming_it_and_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  learning_rate: 1.0e-5\n  learnig_rate: 1.0e-5\n")
    code, _, err = cli("train", "--config", str(bad), "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert code == 2
    assert "unknown key 'learnig_rate'" in err and str(bad) in err
    sect = tmp_path / "sect.yaml"
    sect.write_text("trian:\n  beta2: 0.1\n")
    code, _, err = cli("train", "--config", str(sect), "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert code == 2 and "section 'trian' is not a verb" in err
    code, _, err = cli("train", "--config", "nosuch", "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert code == 2 and "not a packaged preset" in err


@pytest.mark.e2e
def test_a_flag_of_another_algorithm_in_the_file_is_refused(tmp_path, toy_run):
    d, flags = toy_run
    f = tmp_path / "grpo.yaml"
    f.write_text("train:\n  algo: astarpo\n  group_size: 4\n")
    code, _, err = cli(
        "train",
        "--config",
        str(f),
        *flags,
        "--v-star",
        str(d / "v.jsonl"),
        "--out",
        str(tmp_path / "r"),
        cwd=tmp_path,
    )
    assert code == 2 and "--group-size does not apply to --algo astarpo" in err


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def _alias_bomb(levels: int) -> str:
    """A YAML "billion laughs": each level a list of 9 aliases of the level before."""
    names = [chr(ord("a") + i) for i in range(levels)]
    parts = [f"&{names[0]} [{', '.join(['lol'] * 9)}]"]
    parts += [f"&{n} [{', '.join([f'*{p}'] * 9)}]" for p, n in itertools.pairwise(names)]
    return f"train:\n  seed: [{', '.join(parts)}]\n"


@pytest.mark.parametrize(
    ("levels", "says"),
    [
        (5, f"expand to more than {MAX_VALUES} items"),  # 9**5 items within the depth
        (MAX_DEPTH + 2, f"nest deeper than {MAX_DEPTH} levels"),  # 9**12 items
    ],
)
def test_a_yaml_alias_bomb_is_refused_at_once_with_a_short_message(levels, says, tmp_path, capsys):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_alias_bomb(levels))
    assert len(bomb.read_bytes()) < 600
    build_parser(["train"])  # the modules are imported before the clock starts
    start = time.perf_counter()
    code = main(["train", "--config", str(bomb), "--out", str(tmp_path / "r")])
    elapsed = time.perf_counter() - start
    err = _one_error_line(capsys)
    assert code == 2 and elapsed < 2.0, (code, elapsed)
    assert says in err and str(bomb) in err and len(err) < 400, err


def test_an_error_shows_a_bounded_part_of_a_long_value(tmp_path, capsys):
    f = tmp_path / "long.yaml"
    f.write_text("train:\n  seed: [" + ", ".join(["12345"] * 2000) + "]\n")
    code = main(["train", "--config", str(f), "--out", str(tmp_path / "r")])
    err = _one_error_line(capsys)
    assert code == 2 and "seed" in err and "12345, 12345" in err and len(err) < 400, err


def test_shown_never_walks_more_of_a_value_than_it_shows():
    shared: list = ["lol"] * 9
    for _ in range(40):  # 9**41 items if walked
        shared = [shared] * 9
    start = time.perf_counter()
    text = shown(shared)
    assert time.perf_counter() - start < 0.1
    assert len(text) == 80 and text.startswith("[[[[") and text.endswith("...")
    assert shown("x" * 10**6) == repr("x" * 76)[:77] + "..."
    assert shown({"a": [1, 2]}) == "{'a': [1, 2]}"  # a short value whole, as repr writes it


def test_a_bare_name_or_configs_name_is_a_preset_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for spec in ("paper", "paper.yaml", "configs/paper.yaml"):
        assert resolve_config_path(spec) == PRESETS_DIR / "paper.yaml", spec
    mine = tmp_path / "configs" / "paper.yaml"  # an existing file wins over the preset
    mine.parent.mkdir()
    mine.write_text("train:\n  beta2: 0.5\n")
    assert resolve_config_path("configs/paper.yaml") == Path("configs/paper.yaml")


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("/no/such/dir/paper.yaml", "no such file (nor its folder '/no/such/dir')"),
        ("{tmp}/paper.yaml", "no such file; give an existing YAML/JSON file, or a packaged"),
        ("sub/paper", "no such file (nor its folder 'sub')"),
        ("{tmp}", "is a directory; give a YAML/JSON file"),
        ("nosuch", "no such file, and not a packaged preset (paper)"),
    ],
)
def test_a_path_that_names_no_file_is_an_error_naming_it(spec, says, tmp_path, capsys):
    spec = spec.format(tmp=tmp_path)
    code = main(["train", "--config", spec, "--out", str(tmp_path / "r")])
    err = _one_error_line(capsys)
    assert code == 2 and f"error: --config {spec!r}" in err and says in err, err


@pytest.fixture
def nothing_runs(monkeypatch):
    """Fail the test if a verb reached its run() (a model would be loaded, a bench run)."""

    def refuse(args):
        raise AssertionError("run() was reached: the file's value was not refused")

    for verb in CONFIG_VERBS:
        module = __import__(f"astarpo.commands.{verb}", fromlist=["run"])
        monkeypatch.setattr(module, "run", refuse)


ALGOS = "(choose from 'astarpo', 'grpo', 'rloo', 'ppo', 'rebel')"


@pytest.mark.parametrize(
    ("verb", "line", "says"),
    [
        ("train", "dtype: float64", "dtype: invalid choice: 'float64' (choose from 'auto', "),
        ("value", "backend: vlm", "backend: invalid choice: 'vlm' (choose from 'auto', 'hf'"),
        ("train", "algo: grpoo", f"algo: invalid choice: 'grpoo' {ALGOS}"),
        ("train", "learning_rate: true", "learning_rate: invalid float value: 'true'"),
        ("value", "n_samples: 2.5", "n_samples: invalid int value: '2.5'"),
        ("train", "progress: maybe", "progress: expected true or false, got 'maybe'"),
        ("train", "batch_size: [1, 2]", "batch_size takes one value, got a list: [1, 2]"),
        ("train", "batch_size: null", "batch_size has no value (null); give one or leave"),
        ("train", "out: null", "out has no value (null); give one or leave the key out (give "),
    ],
)
def test_a_file_value_is_checked_as_the_flag_is(verb, line, says, tmp_path, capsys, nothing_runs):
    f = tmp_path / "c.yaml"
    f.write_text(f"{verb}:\n  {line}\n")
    code = main([verb, "--config", str(f), "--out", str(tmp_path / "out")])
    err = _one_error_line(capsys)
    assert code == 2 and f"error: --config {f}: {says}" in err, err


def test_an_unknown_algo_is_named_before_the_fields_of_another_algorithm(
    tmp_path, capsys, nothing_runs
):
    # group_size is a field of grpo: without the check first, it would be refused as not an
    # option of the default algorithm, and the misspelt algo never named.
    f = tmp_path / "c.yaml"
    f.write_text("train:\n  group_size: 4\n  algo: grpoo\n")
    assert main(["train", "--config", str(f), "--out", str(tmp_path / "r")]) == 2
    assert f"algo: invalid choice: 'grpoo' {ALGOS}" in _one_error_line(capsys)
    assert main(["train", "--group-size", "4", "--algo", "grpoo", "--out", str(tmp_path)]) == 2
    assert f"error: argument --algo: invalid choice: 'grpoo' {ALGOS}" in _one_error_line(capsys)


def test_file_values_become_the_flags_values(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text(
        "train:\n  learning_rate: 1.0e-5\n  progress: no\n  reward: exact_match\n"
        "  chat_template: true\n  system_prompt: null\n  limit: 3\n"
    )
    parser = build_parser(["train"])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    apply_config_file(sub.choices["train"], "train", str(f))
    args = parser.parse_args(["train", "--out", str(tmp_path / "r"), "--limit", "5"])
    assert args.learning_rate == 1e-5 and args.progress is False and args.chat_template is True
    assert args.reward == ["exact_match"] and args.system_prompt is None
    assert args.limit == 5  # the flag wins


def test_a_verb_name_is_always_a_section(tmp_path, capsys):
    f = tmp_path / "c.yaml"
    f.write_text("value:\n  n_samples: 2\ntrain:\n")  # train's options all commented out
    assert config_values(f, "train") == {} and config_values(f, "value") == {"n_samples": 2}
    for text, kind in [("value:\n  n_samples: 2\ntrain: 5\n", "int: 5"), ("train: [1]\n", "list")]:
        f.write_text(text)
        assert main(["train", "--config", str(f), "--out", str(tmp_path / "r")]) == 2
        err = _one_error_line(capsys)
        assert f"--config {f}: section 'train' must hold the verb's options" in err, err
        assert f"got {kind}" in err
    parser = build_parser()  # so no option may be named after a verb
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    dests = {a.dest for verb in CONFIG_VERBS for a in sub.choices[verb]._actions}
    assert not dests & set(VERBS)


def test_an_option_set_twice_under_its_two_spellings_is_an_error(tmp_path, capsys):
    f = tmp_path / "c.yaml"
    f.write_text("train:\n  learning_rate: 1.0e-5\n  learning-rate: 1.0e-6\n")
    assert main(["train", "--config", str(f), "--out", str(tmp_path / "r")]) == 2
    err = _one_error_line(capsys)
    assert f"--config {f}: key 'learning-rate' sets the option 'learning_rate' a second" in err


def _parsed(verb, text, tmp_path, *flags):
    """The namespace of ``astarpo VERB --config FILE FLAGS`` where FILE holds ``text``."""
    f = tmp_path / "c.yaml"
    f.write_text(text)
    parser = build_parser([verb])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    apply_config_file(sub.choices[verb], verb, str(f))
    return parser.parse_args([verb, *flags])


def test_a_yaml_list_is_the_flags_comma_separated_list(tmp_path):
    out = ["--out", str(tmp_path / "r")]
    args = _parsed("train", "train:\n  report_to: [tensorboard]\n", tmp_path, *out)
    assert args.report_to == "tensorboard"
    args = _parsed("train", "train:\n  report_to: [tensorboard, wandb]\n", tmp_path, *out)
    assert AStarPOConfig(report_to=args.report_to).reporters == ("tensorboard", "wandb")
    args = _parsed("eval", "eval:\n  benchmarks: [math500, amc2023]\n", tmp_path)
    assert args.benchmarks == "math500,amc2023"


def test_a_repeated_flag_replaces_the_files_list(tmp_path):
    text = "train:\n  reward: [gsm8k, math_verify]\n"
    out = ["--out", str(tmp_path / "r")]
    assert _parsed("train", text, tmp_path, *out).reward == ["gsm8k", "math_verify"]
    args = _parsed("train", text, tmp_path, *out, "--reward", "exact_match")
    assert args.reward == ["exact_match"]  # not the file's two plus this one
    args = _parsed("train", text, tmp_path, *out, "--reward", "a:f", "--reward", "b:g")
    assert args.reward == ["a:f", "b:g"]
    args = _parsed("eval", "eval:\n  data: [a.jsonl]\n", tmp_path, "--data", "b.jsonl")
    assert args.data == ["b.jsonl"]


def test_a_train_config_error_names_the_flags(tmp_path, capsys):
    base = ["train", "--model", "toy", "--out", str(tmp_path / "r")]
    assert main([*base, "--batch-size", "3", "--minibatches", "2"]) == 2
    err = _one_error_line(capsys)
    assert "error: --batch-size (3) must be divisible by --minibatches (2)" in err, err
    assert main([*base, "--device", "tpu"]) == 2
    assert "error: --device must be 'auto', 'cpu', 'cuda' or 'cuda:N'" in _one_error_line(capsys)


@pytest.mark.parametrize("where", ["flag", "file"])
def test_an_empty_report_to_is_an_error_and_none_the_way_to_say_no_tracker(where, tmp_path, capsys):
    f = tmp_path / "c.yaml"
    f.write_text("train:\n  report_to: []\n")
    given = ["--report-to", ""] if where == "flag" else ["--config", str(f)]
    code = main(["train", "--model", "toy", "--out", str(tmp_path / "r"), *given])
    err = _one_error_line(capsys)
    assert code == 2 and "error: --report-to is empty" in err, err
    assert "give 'none' for no tracker" in err
    assert "tensorboard, trackio, wandb" in err
    assert not (tmp_path / "r").exists()


def _an_overwritten_run(tmp_path):
    """A run directory whose run_config.json records --overwrite, and the user's files in it."""
    run = tmp_path / "a"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    (run / "notes.txt").write_text("mine\n")
    record = {
        "config_class": "AStarPOConfig",
        "algorithm": "astarpo",
        "config": {"output_dir": str(run), "overwrite_output_dir": True, "beta2": 0.25},
        "rewards": ["exact_match"],
    }
    (run / "run_config.json").write_text(json.dumps(record))
    return run


def test_a_repeated_run_config_takes_neither_the_old_out_nor_overwrite(tmp_path, capsys):
    run = _an_overwritten_run(tmp_path)
    rc = str(run / "run_config.json")
    with pytest.raises(SystemExit) as stop:  # argparse: --out is required
        main(["train", "--config", rc, "--model", "toy", "--data", str(tmp_path / "d.jsonl")])
    assert stop.value.code == 2
    assert "the following arguments are required: --out" in _one_error_line(capsys)
    assert {p.name for p in run.iterdir()} == {"metrics.jsonl", "notes.txt", "run_config.json"}
    parser = build_parser(["train"])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    apply_config_file(sub.choices["train"], "train", rc)
    args = parser.parse_args(["train", "--out", str(tmp_path / "b")])
    assert args.out == str(tmp_path / "b") and args.overwrite is False
    assert args.beta2 == 0.25 and args.algo == "astarpo" and args.reward == ["exact_match"]


# --------------------------------------------------------------- provenance in the Trainer
def _table(tmp_path, model_name, rows=ROWS, max_new_tokens=3):
    gen = FakeGenerator({r["prompt"]: r["answer"] for r in rows})
    return estimate_values(
        gen,
        rows,
        [exact_match_reward],
        Stage1Config(
            n_samples=2,
            beta1=0.5,
            max_new_tokens=max_new_tokens,
            prompts_per_call=2,
            progress=False,
        ),
        out_path=tmp_path / "v.jsonl",
        provenance={"model": model_name},
    )


def _train(tokenizer, tmp_path, model, table, rows=ROWS, **kw):
    """One step of ``model`` (a saved folder) on ``rows`` with the V* ``table`` (toy_trainer)."""
    trainer = toy_trainer(tokenizer, tmp_path, model=model, table=table, rows=rows,
                          rewards=[exact_match_reward], max_steps=1, **kw)  # fmt: skip
    return trainer.train()


@pytest.fixture
def saved_model(tokenizer, tmp_path):
    path = tmp_path / "base"
    make_tiny_model(tokenizer).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def test_the_python_api_refuses_a_table_of_another_model(tokenizer, tmp_path, saved_model):
    # The README's TRL-style example, with a table made by another model.
    table = _table(tmp_path, "models/other")
    with pytest.raises(ValueTableError, match="model: table 'models/other'"):
        _train(tokenizer, tmp_path / "a", saved_model, table)
    history = _train(tokenizer, tmp_path / "b", saved_model, table, allow_v_star_mismatch=True)
    assert history and "loss" in history[-1]
    # A table of the same model (the directory, however it is spelled) passes.
    same = _table(tmp_path / "s", str(Path(saved_model) / ".." / "base"))
    _train(tokenizer, tmp_path / "c", saved_model, same)


def test_other_sampling_settings_are_refused(tokenizer, tmp_path, saved_model):
    table = _table(tmp_path, saved_model, max_new_tokens=5)
    with pytest.raises(ValueTableError, match="sampling max_new_tokens: table 5, training 3"):
        _train(tokenizer, tmp_path / "a", saved_model, table)


def test_a_subset_of_the_table_needs_no_override_and_a_missing_prompt_is_named(
    tokenizer, tmp_path, saved_model
):
    table = ValueTable.load(_table(tmp_path, saved_model).path)
    kept = table.select(ROWS[:5])  # e.g. the all-wrong prompts left out
    assert len(kept) == 5
    history = _train(tokenizer, tmp_path / "a", saved_model, table, rows=kept)
    assert history
    extra = [*ROWS[:3], {"prompt": "98+99=", "answer": "197"}]
    with pytest.raises(MissingPromptError, match="98\\+99="):
        _train(tokenizer, tmp_path / "b", saved_model, table, rows=extra)
    with pytest.raises(MissingPromptError, match="98\\+99="):  # not even with the override
        _train(
            tokenizer, tmp_path / "c", saved_model, table, rows=extra, allow_v_star_mismatch=True
        )


def test_run_config_records_the_algorithm_that_ran(tokenizer, tmp_path, saved_model):
    from astarpo.llm.algorithms.astarpo import AStarPO

    args = quick_config(tmp_path / "r", max_steps=1, batch_size=4, beta2=1e-3, max_new_tokens=3)
    trainer = AStarPOTrainer(
        model=saved_model,
        reward_funcs=exact_match_reward,
        args=args,
        train_dataset=ROWS,
        v_star_table={r["prompt"]: 0.5 for r in ROWS},
        processing_class=tokenizer,
        algorithm=AStarPO(beta2=0.25),
    )
    trainer.train()
    record = json.loads((tmp_path / "r" / "run_config.json").read_text())
    assert record["algorithm"] == "astarpo"
    assert record["algorithm_settings"] == {"beta2": 0.25}  # not the args' 1e-3


# ------------------------------------------------------------- V* tables interoperate
@pytest.mark.e2e
def test_export_writes_a_dataset_that_train_reads_back(toy_run, tmp_path):
    from datasets import load_from_disk

    d, flags = toy_run
    out = tmp_path / "exported"
    code, _, err = toy_value(d, flags, "--export", str(out))
    assert code == 0, err
    ds = load_from_disk(str(out))
    table = ValueTable.load(d / "v.jsonl")
    assert {"prompt", "answer", "v_star", "pass_rate", "rewards"} <= set(ds.column_names)
    assert [r["v_star"] for r in ds] == [r.v_star for r in table]
    back = ValueTable.load(out)
    assert [r.to_json() for r in back] == [r.to_json() for r in table]
    code, _, err = toy_train(d, flags, out, tmp_path / "run")
    assert code == 0, err
    code, _, err = cli(
        "value", *flags, "--out", str(tmp_path / "w.jsonl"), "--export", str(out), cwd=d
    )
    assert code == 2 and "exists" in err
    with pytest.raises(ValueTableError, match="not a saved dataset"):
        ValueTable.load(tmp_path)
