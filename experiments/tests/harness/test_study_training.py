"""A run's config, reference and policy back from its spec."""

from __future__ import annotations

import json

import torch

from experiments.harness.training import load_run


def test_load_run_restores_tuples_and_resolved_paths(tmp_path, monkeypatch, tiny_model):
    from experiments.efficiency.config import EfficiencyConfig

    monkeypatch.chdir(tmp_path)
    cfg = EfficiencyConfig.from_dict(dict(algos=("astarpo", "grpo"), cache_dir="cache")).resolved()
    assert cfg.cache_dir == str(tmp_path / "cache")
    tiny_model.save_pretrained(tmp_path / "ref")
    spec = {"config": json.loads(json.dumps(cfg.to_dict())), "reference": str(tmp_path / "ref")}
    threads = torch.get_num_threads()
    try:
        back, _, ref, policy = load_run(spec, EfficiencyConfig)
    finally:
        torch.set_num_threads(threads)
    assert back == cfg and back.algos == ("astarpo", "grpo")
    assert not ref.training and policy.training and policy is not ref
