"""The trainer's LoRA reference and vLLM generation options (one process)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import torch
from fake_vllm import make_fake_vllm
from fakes import record_batches
from test_trainer_distributed import make_trainer

from astarpo.llm.models.logprobs import sequence_logprobs
from astarpo.llm.models.lora import AdapterDisabledReference, parameter_bytes


def test_lora_reference_is_the_base_model(tmp_path: Path) -> None:
    base = make_trainer(str(tmp_path / "base"), max_steps=1).model  # the initial weights
    tr = make_trainer(
        str(tmp_path / "lora"), lora_r=4, lora_alpha=8, learning_rate=0.05, fresh_ref=False
    )
    assert isinstance(tr.ref_model, AdapterDisabledReference) and tr.ref_model.policy is tr.model
    assert all("lora_" in n for n, p in tr.model.named_parameters() if p.requires_grad)
    batches = record_batches(tr)
    tr.step()
    tr.step()
    batch = batches[-1]
    assert batch is not None
    with torch.no_grad():
        base_logp = sequence_logprobs(base, batch.packed).logp
        policy_logp = sequence_logprobs(tr.model, batch.packed).logp
    # Reference log-probs of the trainer = the base model's, though the policy has moved.
    torch.testing.assert_close(batch.logp_ref, base_logp, rtol=0, atol=0)
    assert (policy_logp - base_logp).abs().max() > 1e-4
    # One copy of the weights plus adapters, against two copies with a separate reference.
    held = parameter_bytes(tr.model, tr.ref_model)
    separate = parameter_bytes(base, copy.deepcopy(base))
    adapters = sum(p.numel() * p.element_size() for p in tr.model.parameters() if p.requires_grad)
    assert held == parameter_bytes(base) + adapters < separate


def test_vllm_backend_is_synced_after_every_update(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = make_fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", mod)
    synced: list[dict[str, torch.Tensor]] = []
    tr = make_trainer(
        str(tmp_path),
        max_steps=2,
        backend="vllm",
        gpu_memory_utilization=0.25,
        minibatches=1,
    )
    init = mod.calls["llm_init"]
    assert init["gpu_memory_utilization"] == 0.25
    assert (Path(init["model"]) / "config.json").is_file()  # the policy, saved for vLLM
    engine_model = tr.generator.generator.llm.model  # ChunkSeededGenerator -> VLLMGenerator

    def snapshot() -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in tr.model.state_dict().items()}

    for _ in range(2):
        before = snapshot()
        engine_model.loaded.clear()
        tr.step()
        loaded = dict(engine_model.loaded)
        synced.append(loaded)
        # The weights loaded before this step's generation are the policy's at that time.
        assert loaded.keys() == before.keys()
        for name, value in before.items():
            assert torch.equal(loaded[name], value)
    assert any(not torch.equal(synced[0][k], synced[1][k]) for k in synced[0])  # updated
    assert mod.calls["reset"] == 2
    # Per-prompt seeds of the global batch positions reach vLLM.
    params = mod.calls["generate"][-1][1]
    assert len({p.kwargs["seed"] for p in params}) == len(params) == 8


def test_final_lora_model_is_saved_merged(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from astarpo.llm.training.final_model import save_final_model

    tr = make_trainer(
        str(tmp_path / "run"), lora_r=4, lora_alpha=8, learning_rate=0.05, fresh_ref=False
    )
    batches = record_batches(tr)
    tr.step()
    save_final_model(tr.model, tr.tokenizer, tmp_path / "final")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "final", local_files_only=True)
    batch = batches[-1]
    assert batch is not None
    with torch.no_grad():
        expected = sequence_logprobs(tr.model, batch.packed).logp
        got = sequence_logprobs(loaded, batch.packed).logp
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert not any("lora" in k for k in loaded.state_dict())
