from __future__ import annotations

import pytest
import torch

from astarpo.llm.rollout.base import Generator, SamplingConfig
from astarpo.llm.rollout.hf import HFGenerator

PROMPTS = ["12+34=", "5+5=", "99+1="]


def test_is_a_generator_and_prompt_major(tiny_model, tokenizer):
    gen = HFGenerator(tiny_model, tokenizer, batch_size=4)
    assert isinstance(gen, Generator)
    r = gen.generate(PROMPTS, n=3, sampling=SamplingConfig(max_new_tokens=5), seed=0)
    assert len(r) == 9 and r.n == 3
    assert r.prompts == [p for p in PROMPTS for _ in range(3)]
    for i, p in enumerate(r.prompts):
        assert r.prompt_ids[i] == tokenizer(p, add_special_tokens=False)["input_ids"]


def test_seed_determinism_and_rng_untouched(tiny_model, tokenizer):
    gen = HFGenerator(tiny_model, tokenizer, batch_size=2)
    s = SamplingConfig(max_new_tokens=6)
    state = torch.random.get_rng_state()
    a = gen.generate(PROMPTS, 4, s, seed=7)
    b = gen.generate(PROMPTS, 4, s, seed=7)
    c = gen.generate(PROMPTS, 4, s, seed=8)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert a.response_ids == b.response_ids
    assert a.response_ids != c.response_ids


def test_eos_kept_truncation_marked_and_modes_restored(tiny_model, tokenizer):
    eos = tokenizer.eos_token_id
    gen = HFGenerator(tiny_model, tokenizer, batch_size=8)
    tiny_model.train()
    r = gen.generate(PROMPTS * 10, 2, SamplingConfig(max_new_tokens=3, temperature=3.0), seed=0)
    assert tiny_model.training
    for ids, trunc, comp in zip(r.response_ids, r.truncated, r.completions, strict=True):
        if trunc:
            assert len(ids) == 3 and eos not in ids
        else:
            assert ids[-1] == eos and eos not in ids[:-1]
        assert comp == tokenizer.decode(ids, skip_special_tokens=True)
    assert any(r.truncated) and not all(r.truncated)


def test_greedy_matches_argmax_and_ignores_seed(tiny_model, tokenizer):
    gen = HFGenerator(tiny_model, tokenizer)
    s = SamplingConfig(max_new_tokens=4, temperature=0.0)
    a = gen.generate(PROMPTS, 1, s, seed=0)
    b = gen.generate(PROMPTS, 1, s, seed=123)
    assert a.response_ids == b.response_ids
    tiny_model.eval()
    for p, resp in zip(a.prompt_ids, a.response_ids, strict=True):
        ids = list(p)
        for tok in resp:
            with torch.no_grad():
                nxt = int(tiny_model(torch.tensor([ids])).logits[0, -1].argmax())
            assert nxt == tok
            ids.append(nxt)


def test_top_p_tiny_is_greedy(tiny_model, tokenizer):
    gen = HFGenerator(tiny_model, tokenizer)
    g = gen.generate(PROMPTS, 1, SamplingConfig(max_new_tokens=4, temperature=0.0), seed=0)
    t = gen.generate(PROMPTS, 2, SamplingConfig(max_new_tokens=4, top_p=1e-6), seed=5)
    assert t.response_ids[::2] == g.response_ids


def test_bad_arguments(tiny_model, tokenizer):
    with pytest.raises(ValueError, match="batch_size"):
        HFGenerator(tiny_model, tokenizer, batch_size=0)
    gen = HFGenerator(tiny_model, tokenizer)
    with pytest.raises(ValueError, match="n must be"):
        gen.generate(PROMPTS, 0, SamplingConfig(), seed=0)
    with pytest.raises(ValueError, match="no tokens"):
        gen.generate([""], 1, SamplingConfig(), seed=0)


def test_inference_mode_unless_a_wrapper_writes_the_weights(tiny_model, tokenizer):
    from astarpo.llm.rollout.hf import _no_grad_mode

    assert isinstance(_no_grad_mode(tiny_model), torch.inference_mode)
    # The responses of inference mode are those of no_grad, and the model still trains after.
    gen = HFGenerator(tiny_model, tokenizer, batch_size=4)
    s = SamplingConfig(max_new_tokens=5)
    a = gen.generate(PROMPTS, 2, s, seed=3)
    ids = torch.tensor([tokenizer("12+34=", add_special_tokens=False)["input_ids"]])
    tiny_model(input_ids=ids).logits.sum().backward()
    tiny_model.zero_grad(set_to_none=True)
    tiny_model.model.layers[0]._hf_hook = object()  # accelerate's offload hook writes weights
    try:
        assert isinstance(_no_grad_mode(tiny_model), torch.no_grad)
        assert gen.generate(PROMPTS, 2, s, seed=3).response_ids == a.response_ids
    finally:
        del tiny_model.model.layers[0]._hf_hook


def test_prompt_ids_are_kept_per_tokenizer_and_not_shared(tiny_model, tokenizer):
    gen = HFGenerator(tiny_model, tokenizer, batch_size=4)
    s = SamplingConfig(max_new_tokens=3)
    a = gen.generate(PROMPTS, 2, s, seed=1)
    a.prompt_ids[0].append(99)  # a caller editing its rollout changes no later one
    b = gen.generate(PROMPTS, 2, s, seed=1)
    assert b.response_ids == a.response_ids
    assert b.prompt_ids == [tokenizer(p, add_special_tokens=False)["input_ids"] for p in b.prompts]

    class Shifted:  # another tokenizer: the kept ids are not reused
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def __call__(self, texts, **kw):
            return {"input_ids": [[*ids, ids[-1]] for ids in self.inner(texts, **kw)["input_ids"]]}

    gen.tokenizer = Shifted(tokenizer)
    c = gen.generate(PROMPTS, 1, s, seed=1)
    assert [len(i) for i in c.prompt_ids] == [len(i) + 1 for i in b.prompt_ids[::2]]
