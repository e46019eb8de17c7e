"""The shared protocol: its checks, the run configs, the splits."""

from __future__ import annotations

import pytest

from experiments.harness.config import StudyConfig
from experiments.harness.protocol import (
    Protocol,
    algorithm_config,
    check_backend,
    splits,
)


def test_protocol_rejects_bad_values():
    with pytest.raises(ValueError, match="task must be one of"):
        Protocol.from_dict(dict(task="nosuch"))
    with pytest.raises(ValueError, match="cannot hold the scratchpad task's gold"):
        Protocol.from_dict(dict(task="scratchpad"))  # the addition budget of 5 tokens
    with pytest.raises(ValueError, match="cannot hold the scratchpad2 task's gold"):
        Protocol.from_dict(dict(task="scratchpad2", max_new_tokens=37))  # 37 characters + EOS = 38
    assert Protocol.from_dict(dict(task="scratchpad2", max_new_tokens=38)).task == "scratchpad2"
    with pytest.raises(ValueError, match="backend must be"):
        Protocol.from_dict(dict(backend="sglang"))
    with pytest.raises(ValueError, match="micro_batch_size must be an integer >= 0"):
        Protocol.from_dict(dict(micro_batch_size=-1))
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1, got True"):
        Protocol.from_dict(dict(batch_size=True))
    with pytest.raises(ValueError, match="eval_every_seconds must be a finite number"):
        Protocol.from_dict(dict(eval_every_seconds=float("nan")))
    with pytest.raises(ValueError, match="reference_target"):
        Protocol.from_dict(dict(reference_target=1.0))
    with pytest.raises(ValueError, match="group_size must be >= 2"):
        Protocol.from_dict(dict(group_size=1))
    with pytest.raises(ValueError, match="threads must be an integer >= 1"):
        StudyConfig.from_dict(dict(threads=0))


def test_algorithm_config_and_splits(tmp_path):
    cfg = Protocol.from_dict(
        dict(task="scratchpad", max_new_tokens=78, micro_batch_size=16, pool_size=64)
    )
    a = algorithm_config("astarpo_drop", cfg, 1, tmp_path, 3e-4, 42.0)
    assert (a.beta2, a.learning_rate, a.max_train_seconds) == (1e-3, 3e-4, 42.0)
    assert a.allow_v_star_mismatch and a.reward_timeout == cfg.train.reward_timeout
    assert not algorithm_config("astarpo", cfg, 1, tmp_path, 3e-4, 42.0).allow_v_star_mismatch
    grpo = algorithm_config("grpo", cfg, 0, tmp_path, 1e-3, 10.0)
    assert grpo.group_size == 8 and grpo.micro_batch_size == 16
    assert grpo.eval_every_seconds == cfg.train.eval_every_seconds
    with pytest.raises(ValueError, match="unknown algorithm"):
        algorithm_config("sgd", cfg, 0, tmp_path, 1e-3, 10.0)
    rows = splits(cfg)
    assert rows["pool"][0]["answer"].endswith(rows["pool"][0]["sum"])
    assert len(rows["pool"]) == 64 and "ans=" in rows["held_out"][0]["answer"]
    assert rows["check"] == rows["val"][: len(rows["check"])]
    with pytest.raises(ValueError, match="pool_size <= 8000"):
        splits(Protocol.from_dict(dict(pool_size=8001)))


def test_check_backend():
    if __import__("importlib").util.find_spec("vllm") is None:
        with pytest.raises(RuntimeError, match=r"needs vLLM.*--backend hf"):
            check_backend("vllm")
    check_backend("hf")
