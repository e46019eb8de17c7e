"""LoRA policy with the reference = the same model with adapters disabled."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from toy_setup import tiny_qwen

from astarpo.llm.models.lora import (
    AdapterDisabledReference,
    adapters_disabled,
    apply_lora,
    is_lora_model,
    parameter_bytes,
)

IDS = torch.tensor([[3, 4, 5, 6, 7, 8, 9], [10, 11, 12, 13, 14, 15, 16]])
PROMPT_LEN = 3


def response_logp(model: nn.Module) -> torch.Tensor:
    """Sum of log pi(y_t | x, y_<t) over the response tokens (positions >= PROMPT_LEN), [B]."""
    logits = model(input_ids=IDS).logits[:, :-1].double()
    token_logp = torch.log_softmax(logits, -1).gather(-1, IDS[:, 1:, None])[..., 0]
    return token_logp[:, PROMPT_LEN - 1 :].sum(-1)


def test_disabled_adapter_logprobs_equal_base_before_and_after_training() -> None:
    base = tiny_qwen()
    base_copy = copy.deepcopy(base)
    with torch.no_grad():
        base_logp = response_logp(base_copy)
    policy = apply_lora(base, r=4, alpha=8, seed=1)
    ref = AdapterDisabledReference(policy)
    with torch.no_grad():
        # B = 0 at init: policy, reference and base agree.
        torch.testing.assert_close(response_logp(policy), base_logp, rtol=0, atol=0)
        torch.testing.assert_close(response_logp(ref), base_logp, rtol=0, atol=0)
    trainable = [p for p in policy.parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n, p in policy.named_parameters() if p.requires_grad)
    opt = torch.optim.SGD(trainable, lr=0.5)
    for _ in range(2):
        loss = -response_logp(policy).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        trained = response_logp(policy)
        ref_logp = response_logp(ref)
    assert (trained - base_logp).abs().max() > 1e-3  # the adapters moved the policy
    assert torch.equal(ref_logp, base_logp)  # the reference did not move, bit for bit
    # After the reference pass the adapters are active again.
    with torch.no_grad():
        torch.testing.assert_close(response_logp(policy), trained, rtol=0, atol=0)


def test_reference_exposes_only_frozen_weights_and_cannot_freeze_policy() -> None:
    policy = apply_lora(tiny_qwen(), r=2, seed=0)
    ref = AdapterDisabledReference(policy)
    assert ref.policy is policy and not list(ref.children())
    frozen = [p for p in policy.parameters() if not p.requires_grad]
    assert list(ref.parameters()) == frozen and frozen
    assert all("lora_" not in n for n, _ in ref.named_parameters())
    adapters = [p for p in policy.parameters() if p.requires_grad]
    policy.train()
    ref.requires_grad_(False)
    ref.eval()
    assert adapters and all(p.requires_grad for p in adapters)
    assert policy.training
    assert ref.config is not None and next(ref.parameters()).device == torch.device("cpu")
    assert is_lora_model(policy) and not is_lora_model(tiny_qwen())


def test_weights_memory_lower_than_separate_reference() -> None:
    full_policy = tiny_qwen()
    separate = parameter_bytes(full_policy, copy.deepcopy(full_policy))
    one_copy = parameter_bytes(full_policy)
    assert separate == 2 * one_copy
    assert parameter_bytes(full_policy, full_policy) == one_copy  # shared storage counted once
    policy = apply_lora(tiny_qwen(), r=4, seed=0)
    adapters = sum(p.numel() * p.element_size() for p in policy.parameters() if p.requires_grad)
    shared = parameter_bytes(policy, AdapterDisabledReference(policy))
    assert shared == one_copy + adapters
    assert shared < separate


def test_errors() -> None:
    with pytest.raises(TypeError, match="apply_lora"):
        AdapterDisabledReference(tiny_qwen())
    with pytest.raises(TypeError, match="no adapters"), adapters_disabled(tiny_qwen()):
        pass
    for bad in ({"r": 0}, {"alpha": 0}, {"dropout": 1.0}):
        with pytest.raises(ValueError, match="LoRA"):
            apply_lora(tiny_qwen(), **bad)  # type: ignore[arg-type]


def test_seeded_adapters_are_reproducible() -> None:
    a = apply_lora(tiny_qwen(), r=2, seed=3)
    b = apply_lora(tiny_qwen(), r=2, seed=3)
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert na == nb and torch.equal(pa, pb)
