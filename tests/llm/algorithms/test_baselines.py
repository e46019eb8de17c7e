"""The baselines in the shared Stage 2 loop: protocol, losses on real batches, short runs."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch
from fakes import record_batches
from toy_setup import make_tiny_model, toy_trainer

from astarpo.llm.algorithms.base import Algorithm
from astarpo.llm.algorithms.grpo import GRPO, RLOO, GRPOConfig, RLOOConfig
from astarpo.llm.algorithms.losses import clipped_policy_loss, group_advantages, rebel_loss
from astarpo.llm.algorithms.ppo import PPO, PPOConfig, ValueModel
from astarpo.llm.algorithms.rebel import REBEL, REBELConfig
from astarpo.llm.models.logprobs import pack, sequence_logprobs
from astarpo.llm.toy.problems import addition_task
from astarpo.llm.training.trainers import GRPOTrainer, PPOTrainer, REBELTrainer, RLOOTrainer

ROWS = addition_task(16, seed=0)


def digit_fraction_reward(prompts, completions, answer, **_):
    """Dense for a random model: the fraction of digit characters in the completion."""
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


COMMON = {
    "max_steps": 2,
    "batch_size": 4,
    "max_new_tokens": 4,
    "learning_rate": 3e-3,
    "save_steps": 0,
    "seed": 3,
}

CASES = {
    "grpo": (GRPOTrainer, GRPOConfig, {"group_size": 4, "kl_coef": 0.05}),
    "dr_grpo": (
        GRPOTrainer,
        GRPOConfig,
        {"group_size": 3, "scale_rewards": False, "loss_aggregation": "seq_sum_norm"},
    ),
    "rloo": (RLOOTrainer, RLOOConfig, {"group_size": 3, "minibatches": 2, "update_epochs": 2}),
    "ppo": (PPOTrainer, PPOConfig, {"kl_coef": 0.05, "minibatches": 2}),
    "rebel": (REBELTrainer, REBELConfig, {"eta": 10.0, "micro_batch_size": 2}),
}


def make(tokenizer, tmp_path, name, **overrides):
    """The case ``name`` of :data:`CASES` (toy_trainer), its rollout batches in ``tr.batches``."""
    trainer_cls, cfg_cls, extra = CASES[name]
    tr = toy_trainer(tokenizer, tmp_path / name, trainer=trainer_cls, cls=cfg_cls, rows=ROWS,
                     table=None, rewards=[digit_fraction_reward], fresh_ref=True,
                     **{**COMMON, **extra, **overrides})  # fmt: skip
    tr.batches = record_batches(tr)
    return tr


@pytest.mark.parametrize("name", list(CASES))
def test_short_run_is_finite_and_changes_parameters(tokenizer, tmp_path, name):
    tr = make(tokenizer, tmp_path, name)
    before = copy.deepcopy(tr.model.state_dict())
    history = tr.train()
    steps = [r for r in history if "loss" in r]
    assert len(steps) == 2
    for rec in steps:
        for key in ("loss", "grad_norm", "reward/mean"):
            assert torch.isfinite(torch.tensor(rec[key])), (key, rec[key])
    changed = [not torch.equal(before[k], v) for k, v in tr.model.state_dict().items()]
    assert any(changed)
    assert all(torch.isfinite(p).all() for p in tr.model.parameters())
    assert len(tr.batches[-1]) == 4 * tr.algorithm.samples_per_prompt
    assert (tmp_path / name / "checkpoint-2").exists()


def test_algorithms_satisfy_protocol():
    algos = [
        GRPO(GRPOConfig()),
        RLOO(RLOOConfig()),
        REBEL(REBELConfig()),
        PPO(PPOConfig(), torch.nn.Linear(1, 1)),
    ]
    for algo in algos:
        assert isinstance(algo, Algorithm)
    assert [a.samples_per_prompt for a in algos] == [8, 8, 2, 1]
    # One update per rollout: no extra forward for old log-probs, no reference without KL.
    assert not any(a.needs_old_logprobs or a.needs_reference or a.needs_v_star for a in algos)
    assert GRPO(GRPOConfig(update_epochs=2)).needs_old_logprobs
    assert GRPO(GRPOConfig(kl_coef=0.1)).needs_reference


def test_grpo_step_loss_equals_pure_function(tokenizer, tmp_path):
    tr = make(tokenizer, tmp_path, "grpo", max_steps=1, kl_coef=0.0)
    before = copy.deepcopy(tr.model)
    rec = tr.step()
    b = tr.batches[-1]
    adv = group_advantages(b.rewards.view(-1, 4)).flatten()
    torch.testing.assert_close(b.extra["advantage"], adv)
    with torch.no_grad():
        out = sequence_logprobs(before, b.packed)
    expected = clipped_policy_loss(out.token_logp, out.token_logp, adv, out.mask)
    assert rec["loss"] == pytest.approx(float(expected), rel=1e-5, abs=1e-7)
    assert rec["clip_fraction"] == 0.0


def test_rebel_step_loss_equals_pure_function(tokenizer, tmp_path):
    tr = make(tokenizer, tmp_path, "rebel", max_steps=1, micro_batch_size=0)
    before = copy.deepcopy(tr.model)
    rec = tr.step()
    b = tr.batches[-1]
    assert torch.equal(b.group[0::2], b.group[1::2])
    with torch.no_grad():
        logp = sequence_logprobs(before, b.packed).logp
    r = b.rewards
    # At the sampling policy the log-ratios vanish: the loss is the mean squared reward gap.
    expected = rebel_loss(logp[0::2], logp[1::2], logp[0::2], logp[1::2], r[0::2], r[1::2], 10.0)
    assert rec["loss"] == pytest.approx(float(expected), rel=1e-6)
    assert rec["loss"] == pytest.approx(float(((r[0::2] - r[1::2]) ** 2).mean()), rel=1e-6)


def test_ppo_prepare_puts_reward_on_last_token(tokenizer, tmp_path):
    tr = make(tokenizer, tmp_path, "ppo", max_steps=1, kl_coef=0.0)
    tr.algorithm.config = PPOConfig(  # plain GAE targets, no whitening
        output_dir=str(tmp_path), whiten_advantages=False, gamma=1.0, lam=1.0
    )
    tr.step()
    b = tr.batches[-1]
    ex = b.extra
    mask = b.response_mask
    # Zero-initialized value head before the first update: gamma = lam = 1 gives returns equal
    # to the final reward on every response token.
    expected = torch.where(mask, b.rewards[:, None].expand_as(mask), 0.0)
    torch.testing.assert_close(ex["returns"], expected)
    torch.testing.assert_close(ex["old_values"], torch.zeros_like(expected))


def test_value_model_aligns_with_token_logprobs(tokenizer):
    model = make_tiny_model(tokenizer)
    critic = ValueModel.from_causal_lm(model)
    torch.nn.init.normal_(critic.head.weight, generator=torch.Generator().manual_seed(0))
    packed = pack([[5, 6, 7], [8]], [[9, 10], [11, 12, 1]], pad_token_id=0)
    values = critic(packed)
    assert values.shape == packed.input_ids.shape
    assert torch.equal(values == 0, ~packed.response_mask)
    # Same values from each row alone (padding and position ids do not leak).
    alone = critic(pack([[8]], [[11, 12, 1]], pad_token_id=0))
    torch.testing.assert_close(values[1][packed.response_mask[1]], alone[0][alone[0] != 0])
    # The critic is a copy: training it leaves the policy untouched.
    assert critic.backbone is not model.model
    assert all(p.requires_grad for p in critic.parameters())


def test_rebel_rejects_split_pairs():
    with pytest.raises(ValueError, match="micro_batch_size must be even"):
        REBELConfig(micro_batch_size=3)


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"),
    [
        (GRPOConfig, {"group_size": 1}, "group_size"),
        (GRPOConfig, {"loss_aggregation": "sum"}, "loss_aggregation"),
        (GRPOConfig, {"kl_kind": "k9"}, "kl_kind"),
        (RLOOConfig, {"clip_eps": 0.0}, "clip_eps"),
        (PPOConfig, {"lam": 1.5}, "lam"),
        (PPOConfig, {"vf_coef": -1.0}, "vf_coef"),
        (REBELConfig, {"eta": 0.0}, "eta"),
    ],
)
def test_configs_reject_bad_values(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)


def test_trainers_reject_wrong_config(tokenizer):
    model = make_tiny_model(tokenizer)
    with pytest.raises(TypeError, match="GRPOConfig"):
        GRPOTrainer(model, None, [digit_fraction_reward], args=PPOConfig(), train_dataset=ROWS)


def test_from_config_factories(tokenizer):
    assert type(GRPO.from_config(GRPOConfig())) is GRPO
    assert type(RLOO.from_config(RLOOConfig())) is RLOO
    assert type(REBEL.from_config(REBELConfig())) is REBEL
    with pytest.raises(ValueError, match="copy its critic"):
        PPO.from_config(PPOConfig())
    ppo = PPO.from_config(PPOConfig(), ref_model=make_tiny_model(tokenizer))
    assert isinstance(ppo.modules()[0], ValueModel)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("algo", "flags"),
    [
        ("grpo", ["--group-size", "2", "--scale-rewards", "false"]),
        ("ppo", ["--kl-coef", "0.1"]),
        ("rebel", ["--eta", "10"]),
        ("rloo", ["--group-size", "2"]),
    ],
)
def test_train_cli_runs_each_baseline(tmp_path, algo, flags):
    from astarpo.cli import main

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:4]))
    out = tmp_path / algo
    argv = ["train", "--algo", algo, "--model", "toy", "--data", str(data), "--out", str(out)]
    argv += ["--template", "none", "--reward", "exact_match", "--device", "cpu"]
    argv += ["--max-steps", "1", "--batch-size", "2", "--max-new-tokens", "3"]
    argv += ["--learning-rate", "1e-3", "--report-to", "none", "--progress", "false"]
    assert main(argv + flags) == 0
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == 1 and math.isfinite(records[-1]["loss"])
    assert (out / "final" / "config.json").exists()


def test_train_cli_rejects_flags_of_other_algorithms(tmp_path, capsys):
    from astarpo.cli import main

    code = main(["train", "--algo", "astarpo", "--model", "toy", "--out", str(tmp_path),
                 "--group-size", "4"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "does not apply" in err[0], err


def test_docs_table_and_cli_list_every_registered_algorithm(capsys):
    """docs/baselines.md's table and `astarpo train --help` both list the registry."""
    from pathlib import Path

    from astarpo.cli import main
    from astarpo.llm.algorithms.registry import ALGORITHMS

    page = (Path(__file__).parents[3] / "docs" / "baselines.md").read_text()
    for name, spec in ALGORITHMS.items():
        assert f"| `{name}` |" in page, f"docs/baselines.md lacks algorithm {name}"
        assert spec.config.__name__ in page
    for algo in ALGORITHMS:
        with pytest.raises(SystemExit):
            main(["train", "--algo", algo, "--help"])
        text = capsys.readouterr().out
        for name in ALGORITHMS:
            assert name in text.split("--algo")[1], f"train --help lacks {name}"
