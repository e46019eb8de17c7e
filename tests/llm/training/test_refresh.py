"""The moving reference (astarpo.llm.training.refresh, a trainer extension): the reference
becomes the policy every K steps and V* is estimated again by Stage 1; runs without it are
unchanged, and a resume across a refresh continues with the reference it had."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from toy_setup import first_digit_reward, hand_v_star, make_tiny_model, spread_reward, toy_trainer

from astarpo.llm.algorithms.astarpo import AStarPOConfig
from astarpo.llm.stage1.table import ValueTable
from astarpo.llm.training.refresh import (
    ReferenceRefresh,
    RefreshConfig,
    refresh_folder,
    refresh_stage1_config,
)
from astarpo.llm.training.run_dir import RunDirError

RULE = RefreshConfig(every_steps=2, n_samples=4, beta1=0.5)


def refresh(**changes):
    """The ``extensions`` keyword of a trainer with :data:`RULE` (``changes`` applied)."""
    return {"extensions": [ReferenceRefresh(dataclasses.replace(RULE, **changes))]}


def refresh_of(trainer):
    """The trainer's ReferenceRefresh."""
    return next(e for e in trainer.extensions if isinstance(e, ReferenceRefresh))


def test_refresh_copies_the_policy_and_reestimates_v_star(tokenizer, tmp_path):
    rewards = [first_digit_reward, spread_reward]
    trainer = toy_trainer(tokenizer, tmp_path, max_steps=3, rewards=rewards, **refresh())
    start = {k: v.clone() for k, v in trainer.ref_model.state_dict().items()}
    first = [trainer.step() for _ in range(2)]
    assert all(r["refresh/count"] == 0 and r["refresh/samples"] == 0 for r in first)
    at_k = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    record = trainer.step()  # the refresh after step 2 runs first
    ref = trainer.ref_model.state_dict()
    assert ref.keys() == at_k.keys()
    assert all(torch.equal(ref[k], at_k[k]) for k in at_k)
    assert not all(torch.equal(ref[k], start[k]) for k in start)  # the reference moved
    assert not trainer.ref_model.training
    assert not any(p.requires_grad for p in trainer.ref_model.parameters())
    assert any(p.requires_grad for p in trainer.model.parameters())

    cfg, batch = refresh_stage1_config(RULE, trainer.args, 2), trainer.args.generation_batch_size
    expected = hand_v_star(trainer.ref_model, tokenizer, cfg, batch, trainer.rows, rewards)
    assert len(set(expected.tolist())) > 1  # prompts of different values
    np.testing.assert_allclose(trainer.v_star, expected, rtol=1e-12, atol=1e-12)
    assert record["refresh/count"] == 1
    assert record["refresh/samples"] == len(trainer.rows) * RULE.n_samples
    assert record["refresh/v_star_mean"] == pytest.approx(float(expected.mean()))
    assert record["refresh/seconds"] == record["time/refresh"] > 0
    assert record["time/step"] >= record["time/refresh"]  # training cost: in the train clock

    folder = refresh_folder(tmp_path, 2)
    saved = torch.load(folder / "reference.pt", weights_only=True)
    assert all(torch.equal(saved[k], at_k[k]) for k in at_k)
    table = ValueTable.load(folder / "values.jsonl")
    np.testing.assert_array_equal(table.v_star([r["prompt"] for r in trainer.rows]), trainer.v_star)


def test_no_refresh_rule_leaves_the_run_unchanged(tokenizer, tmp_path):
    off = toy_trainer(tokenizer, tmp_path / "off", max_steps=3).train()
    never = toy_trainer(tokenizer, tmp_path / "never", max_steps=3, **refresh(every_steps=10))
    on = never.train()
    losses = [[r["loss"] for r in h if "loss" in r] for h in (off, on)]
    assert len(losses[0]) == 3 and losses[0] == losses[1]  # bit-identical
    assert not any(k.startswith("refresh/") for r in off for k in r)
    assert on[-1]["refresh/count"] == 0 and not (tmp_path / "off" / "refresh").exists()


def test_resume_across_a_refresh_continues_the_refreshed_reference(tokenizer, tmp_path):
    k = RULE.every_steps
    straight = toy_trainer(tokenizer, tmp_path / "a", max_steps=2 * k + 1, **refresh())
    whole = [r["loss"] for r in straight.train() if "loss" in r]

    out = tmp_path / "b"
    first = toy_trainer(tokenizer, out, max_steps=k + 1, **refresh()).train()
    with pytest.raises(RunDirError, match="refresh"):
        toy_trainer(tokenizer, out, max_steps=2 * k + 1, **refresh(n_samples=2)).train(resume=True)
    with pytest.raises(RunDirError, match="extensions"):  # the refresh left out
        toy_trainer(tokenizer, out, max_steps=2 * k + 1).train(resume=True)
    resumed = toy_trainer(tokenizer, out, max_steps=2 * k + 1, **refresh())
    rest = [r["loss"] for r in resumed.train(resume=True) if "loss" in r]
    assert [r["loss"] for r in first] + rest == whole
    assert len(whole) == 2 * k + 1
    assert refresh_of(resumed).count == refresh_of(straight).count == 2
    np.testing.assert_array_equal(resumed.v_star, straight.v_star)
    ref_a, ref_b = straight.ref_model.state_dict(), resumed.ref_model.state_dict()
    assert all(torch.equal(ref_a[n], ref_b[n]) for n in ref_a)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"every_steps": 0}, "every_steps must be an integer >= 1"),
        ({"every_steps": 1.5}, "every_steps must be an integer"),
        ({"every_steps": True}, "every_steps must be an integer"),
        ({"every_steps": 2, "n_samples": 0}, "n_samples must be an integer >= 1"),
        ({"every_steps": 2, "beta1": 0.0}, "beta1 must be a finite number > 0"),
        ({"every_steps": 2, "allocation": "greedy"}, "allocation must be one of"),
    ],
)
def test_bad_refresh_rules_are_refused(fields, match):
    with pytest.raises(ValueError, match=match):
        RefreshConfig(**fields)
    with pytest.raises(TypeError, match="every_steps"):
        RefreshConfig()  # no default period: the refresh is asked for by its period
    with pytest.raises(TypeError, match="needs a RefreshConfig"):
        ReferenceRefresh({"every_steps": 2})


@pytest.mark.parametrize(
    ("fields", "match"),
    [({"lora_r": 4}, "not supported with LoRA"), ({"temperature": 0.0}, "identical samples")],
)
def test_a_refresh_the_config_cannot_run_is_refused_before_any_model_is_built(
    tokenizer, tmp_path, fields, match
):
    with pytest.raises(ValueError, match=match):
        toy_trainer(tokenizer, tmp_path, model=object(), **refresh(), **fields)
    assert not tmp_path.joinpath("run_config.json").exists()


def test_greedy_with_one_sample_and_lora_without_refresh_are_fine():
    greedy = AStarPOConfig(temperature=0.0, output_dir="x")
    ReferenceRefresh(dataclasses.replace(RULE, n_samples=1)).check_config(greedy)
    AStarPOConfig(lora_r=4)


def test_a_reference_of_another_architecture_is_refused(tokenizer, tmp_path):
    other = make_tiny_model(tokenizer, hidden_size=16, intermediate_size=32)
    with pytest.raises(ValueError, match="another architecture"):
        toy_trainer(tokenizer, tmp_path, ref=other, **refresh())
    toy_trainer(tokenizer, tmp_path, ref=other)  # without the rule: any reference


def test_torchrun_is_refused(tokenizer):
    from types import SimpleNamespace

    from astarpo.llm.algorithms.astarpo import AStarPO
    from astarpo.llm.training.reference import ReferenceState

    trainer = SimpleNamespace(
        args=AStarPOConfig(),
        algorithm=AStarPO(),
        distributed=True,
        model=make_tiny_model(tokenizer),
        reference=ReferenceState(make_tiny_model(tokenizer), None, "astarpo"),
    )
    with pytest.raises(ValueError, match="not supported under torchrun"):
        ReferenceRefresh(RULE).on_init(trainer)
    trainer.distributed = False
    ReferenceRefresh(RULE).on_init(trainer)


def test_a_missing_refresh_folder_fails_the_resume_by_name(tokenizer, tmp_path):
    import shutil

    from astarpo.llm.training.checkpoint import CheckpointError

    toy_trainer(tokenizer, tmp_path, max_steps=3, **refresh()).train()
    shutil.rmtree(refresh_folder(tmp_path, 2))
    with pytest.raises(CheckpointError, match="refreshed after step 2"):
        toy_trainer(tokenizer, tmp_path, max_steps=4, **refresh()).train(resume=True)


def test_an_algorithm_without_v_star_is_refused(tokenizer, tmp_path):
    from astarpo.llm.algorithms.grpo import GRPO, GRPOConfig

    with pytest.raises(ValueError, match="reference and V"):
        toy_trainer(tokenizer, tmp_path, algorithm=GRPO(GRPOConfig()), **refresh())


def test_refresh_folders_no_kept_checkpoint_needs_are_deleted(tokenizer, tmp_path):
    rule = refresh(every_steps=1, n_samples=2)
    trainer = toy_trainer(tokenizer, tmp_path, max_steps=4, save_total_limit=1, **rule)
    trainer.train()
    assert sorted(p.name for p in (tmp_path / "refresh").iterdir()) == ["step-3"]
    assert (tmp_path / "checkpoint-4").is_dir() and refresh_of(trainer).count == 3
