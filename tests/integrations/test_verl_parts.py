"""The parts of the verl plugin that need no verl (``make test``): the config check on a plain
nested config, the estimator's sums and refusals, the reward wrapper. ``make test-verl`` runs
them through verl itself (``test_verl_plugin.py``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from astarpo.integrations.verl import (
    astarpo_score,
    check_verl_config,
    compute_astarpo_advantage,
    optimal_advantage_score,
)


def paper_config(**changes):
    """A verl-shaped config (nested dicts) with the A*-PO settings and ``changes``."""
    cfg = {
        "algorithm": {
            "adv_estimator": "astarpo",
            "use_kl_in_reward": True,
            "kl_penalty": "kl",
            "kl_ctrl": {"type": "fixed", "kl_coef": 0.001},
        },
        "actor_rollout_ref": {
            "actor": {
                "kl_loss_coef": 0.001,
                "use_kl_loss": False,
                "policy_loss": {"loss_mode": "astarpo"},
                "loss_agg_mode": "seq-mean-token-sum",
            },
            "rollout": {"n": 1},
        },
    }
    for dotted, value in changes.items():
        node = cfg
        *parents, last = dotted.split(".")
        for p in parents:
            node = node[p]
        node[last] = value
    return cfg


def test_check_verl_config_returns_beta2_and_lists_every_problem():
    assert check_verl_config(paper_config()) == 0.001
    bad = paper_config(
        **{
            "actor_rollout_ref.actor.kl_loss_coef": 0.01,
            "actor_rollout_ref.rollout.n": 8,
            "algorithm.kl_penalty": "low_var_kl",
        }
    )
    with pytest.raises(ValueError) as e:
        check_verl_config(bad)
    text = str(e.value)
    assert "kl_loss_coef (0.01) must equal algorithm.kl_ctrl.kl_coef (0.001)" in text
    assert "rollout.n must be 1, got 8" in text and "kl_penalty must be kl" in text
    with pytest.raises(ValueError, match="kl_coef \\(beta2\\) must be a finite number > 0"):
        check_verl_config(
            paper_config(
                **{"algorithm.kl_ctrl.kl_coef": 0.0, "actor_rollout_ref.actor.kl_loss_coef": 0.0}
            )
        )


def test_the_estimator_puts_each_responses_summed_reward_on_its_tokens():
    rewards = torch.tensor([[0.0, -0.1, 0.7, 0.0], [-0.2, 0.5, 0.0, 9.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    adv, returns = compute_astarpo_advantage(rewards, mask, config=paper_config()["algorithm"])
    want = torch.tensor([[0.6, 0.6, 0.6, 0.0], [0.3, 0.3, 0.0, 0.0]], dtype=torch.float64)
    assert torch.allclose(adv, want, atol=1e-15) and torch.equal(adv, returns)
    with pytest.raises(ValueError, match="use_kl_in_reward must be True"):
        algorithm = paper_config(**{"algorithm.use_kl_in_reward": False})["algorithm"]
        compute_astarpo_advantage(rewards, mask, config=algorithm)
    with pytest.raises(ValueError, match=r"set actor_rollout_ref\.rollout\.n=1"):
        compute_astarpo_advantage(rewards, mask, index=np.array(["u", "u"], dtype=object))


def test_the_reward_wrapper_returns_r_minus_v_star_and_refuses_a_row_without_it():
    calls = []

    def scorer(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        calls.append(kwargs)
        return {"score": 1.0 if solution_str == ground_truth else 0.0, "acc": True}

    score = optimal_advantage_score(scorer)
    out = score("src", "7", "7", {"v_star": 0.25}, flag=1)
    assert out == {"score": 0.75, "raw_score": 1.0, "v_star": 0.25, "acc": True}
    assert calls == [{"flag": 1}]
    assert optimal_advantage_score(lambda **_: 0.5)("s", "x", "y", {"v_star": 0.5})["score"] == 0
    with pytest.raises(KeyError, match=r"data_source='src'.*has no extra_info\['v_star'\]"):
        score("src", "7", "7", {"index": 0})
    with pytest.raises(ValueError, match="not finite"):
        score("src", "7", "7", {"v_star": float("nan")})
    with pytest.raises(ValueError, match="not a number"):
        score("src", "7", "7", {"v_star": True})
    assert len(calls) == 1  # a refused row never reaches the scorer


def test_astarpo_score_runs_an_astarpo_reward_on_one_response():
    exact = astarpo_score("exact_match")
    assert exact("src", "42", "42") == 1.0 and exact("src", "41", "42") == 0.0
    with pytest.raises(ValueError):
        astarpo_score("no_such_reward")
