"""TrainConfig in its own module, its sampling built once, and A*-PO's beta2 checked alone."""

from __future__ import annotations

import dataclasses

import pytest

from astarpo.config import config_fields
from astarpo.llm.algorithms import config as config_helpers
from astarpo.llm.algorithms.astarpo import AStarPOConfig
from astarpo.llm.algorithms.registry import ALGORITHMS
from astarpo.llm.algorithms.train_config import TrainConfig
from astarpo.llm.rollout import base as rollout_base
from astarpo.llm.rollout.base import SamplingConfig


def test_train_config_lives_in_its_own_module_and_every_algorithm_config_extends_it():
    assert TrainConfig.__module__ == "astarpo.llm.algorithms.train_config"
    assert not hasattr(config_helpers, "TrainConfig")  # the helpers module keeps the helpers
    assert all(issubclass(spec.config, TrainConfig) for spec in ALGORITHMS.values())


def test_sampling_is_built_and_validated_once_not_on_every_read(monkeypatch):
    cfg = AStarPOConfig(max_new_tokens=7, temperature=0.5, top_p=0.9)
    built = []
    check = SamplingConfig.__post_init__
    monkeypatch.setattr(
        rollout_base.SamplingConfig, "__post_init__", lambda s: built.append(s) or check(s)
    )
    first = cfg.sampling
    assert all(cfg.sampling is first for _ in range(100))
    assert built == []  # reading it validates nothing again
    other = cfg.replace(temperature=0.0)  # a copy builds its own, once
    assert len(built) == 1 and other.sampling is other.sampling and len(built) == 1
    assert first == SamplingConfig(7, 0.5, 0.9) and other.sampling == SamplingConfig(7, 0.0, 0.9)
    assert cfg == AStarPOConfig(max_new_tokens=7, temperature=0.5, top_p=0.9)


def test_the_cached_sampling_is_no_field():
    cfg = AStarPOConfig()
    fields = dataclasses.asdict(cfg)
    assert "_sampling" not in fields and "sampling" not in fields
    assert "_sampling" not in repr(cfg)
    names = [name for name, _, _ in config_fields(AStarPOConfig)]
    assert [f.name for f in dataclasses.fields(cfg)] == names


@pytest.mark.parametrize(
    ("field", "value"), [("max_new_tokens", 0), ("temperature", -1.0), ("top_p", 0.0)]
)
def test_bad_sampling_fields_are_refused_at_construction(field, value):
    with pytest.raises(ValueError, match=field):
        AStarPOConfig(**{field: value})


def test_astarpo_given_beta2_checks_that_float_without_building_a_config(monkeypatch):
    from astarpo.llm.algorithms.astarpo import AStarPO

    built = []
    post_init = AStarPOConfig.__post_init__
    monkeypatch.setattr(AStarPOConfig, "__post_init__", lambda s: built.append(s) or post_init(s))
    assert AStarPO(0.25).beta2 == 0.25 and AStarPO().beta2 == 1e-3
    for bad in (0.0, -1.0, float("nan"), float("inf"), True, "0.1"):
        with pytest.raises(ValueError, match=r"^beta2 must be a finite number > 0, got "):
            AStarPO(beta2=bad)
    assert built == []  # no 35-field AStarPOConfig made for one float
    with pytest.raises(ValueError) as direct:
        AStarPO(beta2=-2.0)
    with pytest.raises(ValueError) as through_config:
        AStarPOConfig(beta2=-2.0)
    assert str(direct.value) == str(through_config.value)  # one validator, one message


def test_beta1_and_beta2_share_the_objectives_check():
    from astarpo.llm.stage1.config import Stage1Config
    from astarpo.objective import check_beta

    assert check_beta(0.5, "beta1") == 0.5
    for cls, name in ((Stage1Config, "beta1"), (AStarPOConfig, "beta2")):
        with pytest.raises(ValueError) as got:
            cls(**{name: 0.0})
        with pytest.raises(ValueError) as want:
            check_beta(0.0, name)
        assert str(got.value) == str(want.value)
