from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from astarpo.llm.models.logprobs import masked_mean, pack, sequence_logprobs

PROMPTS = [[4, 5, 6], [7], [8, 9, 10, 11]]
RESPONSES = [[1], [3, 4, 5, 1], [12, 13]]


def _reference(model, prompt, response):
    """float64 log-probs of one unpadded sequence, token by token."""
    x = torch.tensor([prompt + response])
    with torch.no_grad():
        lp = torch.log_softmax(model(x).logits[0].double(), -1)
    toks = [lp[len(prompt) - 1 + k, t].item() for k, t in enumerate(response)]
    ent = [
        -(lp[len(prompt) - 1 + k].exp() * lp[len(prompt) - 1 + k]).sum().item()
        for k in range(len(response))
    ]
    return sum(toks), toks, ent


@pytest.fixture
def model64(tiny_model):
    return tiny_model.double().eval()


def test_matches_unpadded_float64_reference(model64):
    out = sequence_logprobs(model64, PROMPTS, RESPONSES, 0, entropy=True)
    for i, (p, r) in enumerate(zip(PROMPTS, RESPONSES, strict=True)):
        logp, toks, ent = _reference(model64, p, r)
        assert out.logp[i].item() == pytest.approx(logp, abs=1e-9)
        got = out.token_logp[i][out.mask[i]].tolist()
        assert got == pytest.approx(toks, abs=1e-9)
        assert out.entropy[i][out.mask[i]].tolist() == pytest.approx(ent, abs=1e-9)
        assert int(out.mask[i].sum()) == len(r)
        # Off-response entries are exactly zero.
        assert torch.all(out.token_logp[i][~out.mask[i]] == 0)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(3, 50), min_size=1, max_size=5),
            st.lists(st.integers(0, 50), min_size=0, max_size=5),
        ),
        min_size=1,
        max_size=4,
    ),
    st.integers(0, 2),
)
def test_left_and_right_padding_agree(model64, rows, pad_id):
    prompts = [p for p, _ in rows]
    responses = [r for _, r in rows]
    left = sequence_logprobs(model64, prompts, responses, pad_id, entropy=True, layout="left")
    right = sequence_logprobs(model64, prompts, responses, pad_id, entropy=True, layout="right")
    torch.testing.assert_close(left.logp, right.logp, atol=1e-10, rtol=0)
    torch.testing.assert_close(left.entropy_mean(), right.entropy_mean(), atol=1e-10, rtol=0)


def test_pad_token_value_is_irrelevant(model64):
    a = sequence_logprobs(model64, PROMPTS, RESPONSES, 0)
    b = sequence_logprobs(model64, PROMPTS, RESPONSES, 33)
    torch.testing.assert_close(a.logp, b.logp, atol=1e-10, rtol=0)


def test_pack_layouts():
    left = pack(PROMPTS, RESPONSES, pad_token_id=0, layout="left")
    assert left.input_ids.shape == (3, 4 + 4)
    # Every response starts at column 4 (the widest prompt).
    assert left.response_mask[:, 4].all() and not left.response_mask[:, :4].any()
    right = pack(PROMPTS, RESPONSES, pad_token_id=0, layout="right")
    assert right.input_ids.shape == (3, 6)
    assert right.attention_mask.sum().item() == left.attention_mask.sum().item() == 15
    assert right.input_ids[1].tolist() == [7, 3, 4, 5, 1, 0]
    with pytest.raises(ValueError, match="at least one token"):
        pack([[]], [[1]], 0)
    with pytest.raises(ValueError, match="rows"):
        pack([[1]], [[1], [2]], 0)


def test_gradient_flows_only_through_policy(tiny_model):
    out = sequence_logprobs(tiny_model, PROMPTS, RESPONSES, 0, entropy=True)
    (out.logp.sum() + out.entropy_mean()).backward()
    assert tiny_model.model.embed_tokens.weight.grad is not None
    with torch.no_grad():
        ref = sequence_logprobs(tiny_model, PROMPTS, RESPONSES, 0)
    assert not ref.logp.requires_grad
    with pytest.raises(ValueError, match="entropy"):
        ref.entropy_mean()


def test_masked_mean():
    v = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    m = torch.tensor([[True, False, True], [False, False, True]])
    assert masked_mean(v, m).item() == pytest.approx((1 + 3 + 6) / 3)
    assert masked_mean(v, torch.zeros_like(m)).item() == 0.0
