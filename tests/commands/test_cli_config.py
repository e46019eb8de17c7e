"""One config path: every verb's flags come from its config dataclass (``Stage1Config`` for
``astarpo value``, the chosen algorithm's config for ``astarpo train``), a flag or ``--config``
key of another algorithm is refused by name before anything is loaded, and each parameter is
validated once, in its config (``beta2`` never per micro-batch)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math

import pytest
import torch
from toy_setup import TINY

import astarpo.objective
from astarpo import advantage_regression_loss
from astarpo.cli import build_parser, main
from astarpo.llm import AStarPOConfig, AStarPOTrainer, Stage1Config
from astarpo.llm.algorithms.astarpo import AStarPO
from astarpo.llm.algorithms.registry import ALGORITHMS
from astarpo.llm.models.toy import make_toy_model
from astarpo.llm.rewards.builtin import exact_match_reward
from astarpo.llm.stage1.estimate import estimate_values
from astarpo.llm.toy.problems import addition_task

ROWS = addition_task(8, seed=0)
# Config fields that a verb sets under another flag's name.
TRAIN_OWN = {"output_dir": "--out", "device": "--device", "overwrite_output_dir": "--overwrite"}
VALUE_OWN = {"progress": "--no-progress"}


def _actions(verb: str, algo: str | None = None) -> dict[str, argparse.Action]:
    """The verb's options by flag (the parser main builds for that command line)."""
    parser = build_parser([verb], algo)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {s: a for a in sub.choices[verb]._actions for s in a.option_strings}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture
def nothing_runs(monkeypatch):
    """Fail the test if the verb reached its run() (a model would be loaded there)."""

    def refuse(args):
        raise AssertionError("run() was reached: the flag was not refused by the parser")

    for verb in ("train", "value"):
        module = __import__(f"astarpo.commands.{verb}", fromlist=["run"])
        monkeypatch.setattr(module, "run", refuse)


# --------------------------------------------------------- astarpo train: one algorithm's flags
@pytest.mark.parametrize(
    "argv",
    [
        ["--algo", "grpo", "--beta2", "0.1"],
        ["--beta2", "0.1", "--algo", "grpo"],  # order does not matter
        ["--algo=grpo", "--beta2=0.1"],
    ],
)
def test_a_flag_of_another_algorithm_is_a_usage_error_naming_both(
    argv, tmp_path, capsys, nothing_runs
):
    code = main(["train", *argv, "--model", "toy", "--out", str(tmp_path / "r")])
    err = _error(capsys)
    assert code == 2, err
    assert "--beta2 does not apply to --algo grpo (GRPOConfig)" in err, err
    assert "--algo astarpo" in err  # where the flag belongs


def test_the_default_algorithm_refuses_a_baseline_flag(tmp_path, capsys, nothing_runs):
    code = main(["train", "--group-size", "4", "--model", "toy", "--out", str(tmp_path)])
    err = _error(capsys)
    assert code == 2 and "--group-size does not apply to --algo astarpo (AStarPOConfig)" in err
    assert "--algo grpo, rloo" in err


def test_a_config_key_of_another_algorithm_is_refused_naming_key_file_and_algorithm(
    tmp_path, capsys, nothing_runs
):
    f = tmp_path / "grpo.yaml"
    f.write_text("train:\n  algo: grpo\n  group_size: 4\n  beta2: 0.1\n")
    code = main(["train", "--config", str(f), "--out", str(tmp_path / "r")])
    err = _error(capsys)
    assert code == 2 and "key 'beta2'" in err and str(f) in err, err
    assert "does not apply to --algo grpo (GRPOConfig)" in err
    # The command line's --algo wins over the file's and decides which keys are foreign.
    g = tmp_path / "astarpo.yaml"
    g.write_text("train:\n  beta2: 0.1\n")
    code = main(["train", "--algo", "rloo", "--config", str(g), "--out", str(tmp_path / "r")])
    err = _error(capsys)
    assert code == 2 and "key 'beta2'" in err and "--algo rloo (RLOOConfig)" in err, err


def test_a_file_of_the_chosen_algorithm_parses(tmp_path, capsys):
    f = tmp_path / "grpo.yaml"
    f.write_text("train:\n  algo: grpo\n  group_size: 4\n")
    # Parsing succeeds; run() then asks for --data (a usage error of its own).
    assert main(["train", "--config", str(f), "--model", "toy", "--out", str(tmp_path)]) == 2
    assert "--data is required" in _error(capsys)


@pytest.mark.parametrize("algo", list(ALGORITHMS))
def test_train_flags_are_the_fields_of_the_algorithms_config(algo):
    actions = _actions("train", algo)
    config = ALGORITHMS[algo].config
    own = {f.name for f in dataclasses.fields(config)}
    for f in dataclasses.fields(config):
        flag = TRAIN_OWN.get(f.name, _flag(f.name))
        assert flag in actions, f"{algo}: no {flag}"
        if f.name not in TRAIN_OWN:
            assert actions[flag].default == f.default, (algo, f.name)  # one default: the field's
            assert f.metadata["help"].split()[0] in (actions[flag].help or "")
    foreign = {f.name for spec in ALGORITHMS.values() for f in dataclasses.fields(spec.config)}
    for name in foreign - own:
        assert actions[_flag(name)].help == argparse.SUPPRESS  # hidden, refused when given


def test_train_help_lists_the_chosen_algorithms_flags_and_the_presets(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = capsys.readouterr().out
    assert "--beta2" in text and "--group-size" not in text and "paper" in text
    assert "--algo NAME --help" in text  # says how to see another algorithm's flags
    with pytest.raises(SystemExit):
        main(["train", "--algo", "grpo", "--help"])
    text = capsys.readouterr().out
    assert "--group-size" in text and "--beta2" not in text and "GRPOConfig" in text


# -------------------------------------------------------------------- astarpo value: Stage1Config
def test_value_flags_are_the_fields_of_stage1config():
    actions = _actions("value")
    for f in dataclasses.fields(Stage1Config):
        flag = VALUE_OWN.get(f.name, _flag(f.name))
        assert flag in actions, f"no flag for Stage1Config.{f.name}"
        if f.name not in VALUE_OWN:
            assert actions[flag].default == f.default, f.name
            assert f.metadata["help"] and f.metadata["help"].split()[0] in actions[flag].help
    assert actions["--no-progress"].default is (not Stage1Config.progress)
    # Stage 1's token budget is training's (a table records it; training refuses another).
    assert Stage1Config().max_new_tokens == AStarPOConfig().max_new_tokens


def test_value_names_the_flag_of_an_invalid_field(tmp_path, capsys, monkeypatch):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    base = ["value", "--model", "toy", "--data", str(data), "--out", str(tmp_path / "v.jsonl")]
    import astarpo.commands.value as value

    def no_model(*a, **k):
        raise AssertionError("the model was loaded before the flags were checked")

    monkeypatch.setattr(value, "load_model", no_model)
    assert main([*base, "--beta1", "0"]) == 2
    assert "--beta1 must be a finite number > 0, got 0.0" in _error(capsys)
    assert main([*base, "--temperature", "0", "--n-samples", "3"]) == 2
    err = _error(capsys)
    assert "--temperature 0 (greedy) gives 3 identical samples" in err and "--n-samples 1" in err


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("n_samples", 0, "n_samples must be an integer >= 1, got 0"),
        ("n_samples", 2.5, "n_samples must be an integer >= 1"),
        ("n_samples", True, "n_samples must be an integer >= 1"),
        ("prompts_per_call", 0, "prompts_per_call must be an integer >= 1"),
        ("max_new_tokens", 0, "max_new_tokens must be an integer >= 1"),
        ("seed", -1, "seed must be an integer >= 0"),
        ("beta1", 0.0, "beta1 must be a finite number > 0"),
        ("beta1", -0.5, "beta1 must be a finite number > 0"),
        ("beta1", math.nan, "beta1 must be a finite number > 0"),
        ("beta1", "0.5", "beta1 must be a finite number > 0"),
        ("reward_timeout", -1.0, "reward_timeout must be a finite number >= 0"),
        ("reward_timeout", math.inf, "reward_timeout must be a finite number >= 0"),
        ("temperature", -0.1, "temperature must be a finite number >= 0"),
        ("top_p", 0.0, r"top_p must be in \(0, 1\]"),
        ("top_p", 1.5, r"top_p must be in \(0, 1\]"),
        ("filter_all_wrong", "yes", "filter_all_wrong must be True or False"),
        ("progress", 1, "progress must be True or False"),
        ("temperature", 0.0, "temperature 0 .greedy. gives 8 identical samples"),
    ],
)
def test_stage1config_refuses_bad_values_naming_the_field(field, value, match):
    with pytest.raises(ValueError, match=match):
        Stage1Config(**{field: value})


def test_stage1config_is_frozen_and_greedy_needs_one_sample():
    cfg = Stage1Config(n_samples=1, temperature=0.0)
    assert cfg.sampling.greedy and cfg.sampling.max_new_tokens == 256
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.n_samples = 2  # type: ignore[misc]
    with pytest.raises(ValueError, match="identical samples"):
        cfg.replace(n_samples=2)
    with pytest.raises(TypeError, match="config must be a Stage1Config, got dict"):
        estimate_values(object(), ROWS, exact_match_reward, {"n_samples": 2})  # type: ignore[arg-type]


# ------------------------------------------------------------------ beta2: validated once
def test_beta2_is_validated_by_the_config_and_never_per_micro_batch(
    tokenizer, tmp_path, monkeypatch
):
    calls = {"loss_beta_checks": 0, "configs": 0}
    check_beta = astarpo.objective.check_beta

    def counting_check(*a, **k):
        calls["loss_beta_checks"] += 1
        return check_beta(*a, **k)

    cfg = AStarPOConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        batch_size=4,
        micro_batch_size=1,  # 4 micro-batches per step
        max_new_tokens=3,
        learning_rate=1e-3,
        beta2=0.05,
        progress=False,
        report_to="none",
    )
    post_init = AStarPOConfig.__post_init__

    def counting_post_init(self):
        calls["configs"] += 1
        post_init(self)

    monkeypatch.setattr(astarpo.objective, "check_beta", counting_check)
    monkeypatch.setattr(AStarPOConfig, "__post_init__", counting_post_init)
    trainer = AStarPOTrainer(
        make_toy_model(tokenizer, seed=0, **TINY),
        None,
        [exact_match_reward],
        args=cfg,
        train_dataset=ROWS,
        v_star_table={r["prompt"]: 0.5 for r in ROWS},
        tokenizer=tokenizer,
    )
    history = trainer.train()
    assert [r["step"] for r in history if "loss" in r] == [1, 2]
    assert trainer.algorithm.beta2 == 0.05
    # 8 micro-batch losses computed; beta2 checked by none of them, and no config re-made.
    assert calls == {"loss_beta_checks": 0, "configs": 0}


def test_beta2_outside_the_trainer_is_still_refused():
    with pytest.raises(ValueError, match="beta2 must be a finite number > 0, got -1"):
        AStarPOConfig(beta2=-1.0)
    with pytest.raises(ValueError, match="beta2 must be a finite number > 0, got 0"):
        AStarPO(beta2=0.0)  # the same check, on the one float
    assert AStarPO().beta2 == AStarPOConfig.beta2 and AStarPO(0.25).beta2 == 0.25
    assert AStarPO.from_config(AStarPOConfig(beta2=0.5)).beta2 == 0.5
    with pytest.raises(ValueError, match="beta2 or config, not both"):
        AStarPO(0.1, config=AStarPOConfig())
    # The pure function checks its beta by default; check=False is the caller's promise.
    x = torch.zeros(2)
    with pytest.raises(ValueError, match="beta must be a finite number > 0"):
        advantage_regression_loss(x, x, x, x, -1.0)
    assert torch.equal(advantage_regression_loss(x, x, x, x, 0.1, check=False), torch.zeros(2))


def test_stage1config_is_exported_from_astarpo_llm():
    """Stage1Config is exported lazily from astarpo.llm, like the trainers' configs."""
    import astarpo.llm
    from astarpo.llm.stage1.config import Stage1Config as defined

    assert "Stage1Config" in astarpo.llm.__all__ and Stage1Config is defined


def test_docs_list_every_stage1config_field_with_its_default_and_flag():
    """docs/llm.md's Stage 1 table names every Stage1Config field, its default and its flag."""
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "llm.md").read_text()
    for f in dataclasses.fields(Stage1Config):
        flag = VALUE_OWN.get(f.name, _flag(f.name))
        assert f"| `{f.name}` | `{f.default!r}` | `{flag}` |" in page, f.name


@pytest.mark.parametrize(
    ("algo", "extra"),
    [
        ("grpo", {"group_size": 2}),
        ("ppo", {"value_clip_eps": 0.2}),
        ("rebel", {"eta": 10.0}),
    ],
)
def test_baseline_losses_do_not_recheck_their_config_per_micro_batch(
    algo, extra, tokenizer, tmp_path, monkeypatch
):
    """clip_eps, value_clip_eps and eta are validated by their configs; the losses of the
    micro-batches are called with check=False (a direct call still checks: below)."""
    import astarpo.llm.algorithms.gae as gae
    import astarpo.llm.algorithms.losses as losses
    from astarpo.llm.training.trainer import Trainer

    checked: list[str] = []
    check_positive = losses.check_positive

    def counting(name, value):
        checked.append(name)
        check_positive(name, value)

    monkeypatch.setattr(losses, "check_positive", counting)
    monkeypatch.setattr(gae, "check_positive", counting)
    cfg = ALGORITHMS[algo].config(
        output_dir=str(tmp_path),
        max_steps=1,
        batch_size=2,
        micro_batch_size=2,
        max_new_tokens=3,
        learning_rate=1e-3,
        progress=False,
        report_to="none",
        **extra,
    )
    model = make_toy_model(tokenizer, seed=0, **TINY)
    trainer = Trainer(
        model, None, [exact_match_reward], args=cfg, train_dataset=ROWS, tokenizer=tokenizer
    )
    assert [r["step"] for r in trainer.train() if "loss" in r] == [1]
    assert not {"clip_eps", "clip_eps_high", "eta"} & set(checked), checked
    x = torch.zeros(2)
    with pytest.raises(ValueError, match="eta must be > 0"):
        losses.rebel_loss(x, x, x, x, x, x, eta=0.0)
    with pytest.raises(ValueError, match="clip_eps must be > 0"):
        losses.clipped_policy_loss(x[None], x[None], x, torch.ones(1, 2), clip_eps=0.0)


def test_no_verb_writes_a_numeric_default_of_its_own():
    """One default per field: astarpo/commands takes numeric defaults from the configs and
    library constants (only seeds and thread counts, 0 and 1, are written there)."""
    import re
    from pathlib import Path

    import astarpo.commands

    found = []
    for path in Path(astarpo.commands.__file__).parent.glob("*.py"):
        for m in re.finditer(r"default=(-?[0-9][0-9_.e+-]*)", path.read_text()):
            if float(m.group(1)) not in (0, 1):
                found.append(f"{path.name}: {m.group(0)}")
    assert not found, found


def test_eval_defaults_are_the_paper_sampling_of_the_library():
    from astarpo.llm.eval import GREEDY, PROMPTS_PER_CALL, SAMPLED

    actions = _actions("eval")
    assert actions["--max-new-tokens"].default == SAMPLED.max_new_tokens == GREEDY.max_new_tokens
    assert (actions["--temperature"].default, actions["--top-p"].default) == (0.6, 0.95)
    assert (SAMPLED.temperature, SAMPLED.top_p, GREEDY.temperature) == (0.6, 0.95, 0.0)
    assert actions["--prompts-per-call"].default == PROMPTS_PER_CALL
    assert "--batch-size" not in actions and "--batch-size" not in _actions("value")


@pytest.mark.parametrize("flag", ["--algo", "--config"])
def test_a_flag_without_its_value_is_one_usage_error(flag, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "--out", str(tmp_path), flag])
    assert e.value.code == 2
    assert f"argument {flag}: expected one argument" in _error(capsys)
