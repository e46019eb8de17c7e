from __future__ import annotations

import pytest
import torch

from astarpo.llm.models.toy import TOY_CHARS, make_toy_model
from astarpo.llm.toy.problems import addition_task


def test_tokenizer_roundtrip_and_specials(tokenizer):
    text = "12+34=46 what?"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text)
    assert tokenizer.decode(ids) == text
    assert tokenizer.pad_token_id == 0 and tokenizer.eos_token_id == 1
    assert len(tokenizer) == 3 + len(TOY_CHARS)
    # Special tokens are dropped on request.
    assert tokenizer.decode([*ids, tokenizer.eos_token_id], skip_special_tokens=True) == text


def test_default_model_is_about_one_million_parameters(tokenizer):
    model = make_toy_model(tokenizer)
    n = sum(p.numel() for p in model.parameters())
    assert 0.8e6 < n < 1.2e6
    assert model.config.model_type == "qwen2"


def test_model_seed_is_deterministic_and_leaves_global_rng(tokenizer):
    state = torch.random.get_rng_state()
    a = make_toy_model(tokenizer, seed=3, hidden_size=32, num_hidden_layers=1)
    b = make_toy_model(tokenizer, seed=3, hidden_size=32, num_hidden_layers=1)
    c = make_toy_model(tokenizer, seed=4, hidden_size=32, num_hidden_layers=1)
    assert torch.equal(torch.random.get_rng_state(), state)
    pa, pb, pc = (next(m.parameters()) for m in (a, b, c))
    assert torch.equal(pa, pb) and not torch.equal(pa, pc)


def test_addition_task_answers_and_disjoint_split():
    rows = addition_task(500, seed=1)
    for r in rows:
        a, b = r["problem"].rstrip("=").split("+")
        assert int(r["answer"]) == int(a) + int(b)
        assert 0 <= int(a) < 100 and 0 <= int(b) < 100
        assert r["prompt"] == r["problem"]
    assert len({r["problem"] for r in rows}) == 500
    assert rows == addition_task(500, seed=1)
    assert rows != addition_task(500, seed=2)
    with pytest.raises(ValueError, match="n must be"):
        addition_task(10_001, seed=0)


def test_zero_padded_addition():
    rows = addition_task(200, seed=3, zero_pad=True)
    for r in rows:
        assert len(r["problem"]) == 6 and len(r["answer"]) == 3
        a, b = r["problem"].rstrip("=").split("+")
        assert int(r["answer"]) == int(a) + int(b)
    # Same draw as the unpadded task, only formatted differently.
    plain = addition_task(200, seed=3)
    assert [int(r["answer"]) for r in rows] == [int(r["answer"]) for r in plain]


def test_answer_probability_is_the_product_of_next_token_probabilities(tokenizer, tiny_model):
    from astarpo.llm.eval import answer_probability

    rows = [{"prompt": "12+34=", "answer": "46"}, {"prompt": "7+8=", "answer": "15"}]
    got = answer_probability(tiny_model.eval(), tokenizer, rows)
    for row, p in zip(rows, got.tolist(), strict=True):
        prompt = tokenizer(row["prompt"], add_special_tokens=False)["input_ids"]
        answer = [*tokenizer(row["answer"], add_special_tokens=False)["input_ids"], 1]
        ids = torch.tensor([prompt + answer])
        with torch.no_grad():
            logits = tiny_model(input_ids=ids).logits[0].double()
        lp = torch.log_softmax(logits, -1)
        want = sum(lp[len(prompt) - 1 + j, t].item() for j, t in enumerate(answer))
        assert p == pytest.approx(float(torch.tensor(want).exp()), rel=1e-4)


def test_sft_stops_at_the_first_check_that_reaches_the_target(tokenizer):
    from astarpo.llm.toy.sft import SFTConfig, check_accuracy, sft

    rows = addition_task(400, seed=0, zero_pad=True)
    train, check = rows[:300], rows[300:]
    model = make_toy_model(tokenizer, seed=0, hidden_size=32, num_hidden_layers=1)
    start = check_accuracy(model, tokenizer, check)
    target = start * 50  # far above the random model, far below 1
    assert target < 0.5
    seen: list[float] = []
    config = SFTConfig(steps=400, batch_size=32, learning_rate=3e-3, target_accuracy=target)

    def at_check(step: int, loss: float) -> None:
        if step % config.check_every == 0:
            seen.append(check_accuracy(model, tokenizer, check))

    losses = sft(model, tokenizer, train, config, at_check, check_rows=check)
    assert len(losses) < config.steps and len(losses) % config.check_every == 0
    assert seen[-1] >= target and all(a < target for a in seen[:-1])
    assert check_accuracy(model, tokenizer, check) == seen[-1]
    with pytest.raises(ValueError, match="check_rows"):
        sft(model, tokenizer, train, config)
    with pytest.raises(ValueError, match="target_accuracy"):
        SFTConfig(target_accuracy=1.5)


@pytest.mark.parametrize("caller", [1, 3])
def test_sft_runs_on_its_own_thread_count_and_restores_the_callers(tokenizer, caller):
    """The fine-tuned model depends on torch's thread count (the order of float sums), so the
    SFT fixes it (``SFTConfig.threads``) whatever the caller's, and gives the caller's back."""
    from astarpo.llm.toy.sft import SFTConfig, sft

    rows = addition_task(8, seed=0, zero_pad=True)
    model = make_toy_model(tokenizer, seed=0, hidden_size=16, num_hidden_layers=1)
    seen: list[int] = []
    before = torch.get_num_threads()
    torch.set_num_threads(caller)
    try:
        sft(model, tokenizer, rows, SFTConfig(steps=2, batch_size=4, threads=2),
            lambda step, loss: seen.append(torch.get_num_threads()))  # fmt: skip
        assert torch.get_num_threads() == caller
    finally:
        torch.set_num_threads(before)
    assert seen == [2, 2]
    with pytest.raises(ValueError, match="threads"):
        SFTConfig(threads=0)


def test_word_tokenizer_ids_round_trip_and_refusals():
    """Specials first, then the words in order; the split pattern cuts a text into words;
    a repeated word is refused."""
    from astarpo.llm.models.toy import make_word_tokenizer

    tok = make_word_tokenizer(["1", "2", "<w5>", "<w6>"], split="<w[0-9]+>|.")
    assert len(tok) == 7 and tok.pad_token_id == 0 and tok.eos_token_id == 1
    assert tok.encode("12<w6><w5>") == [3, 4, 6, 5]
    assert tok.decode([6, 3]) == "<w6>1"
    with pytest.raises(ValueError, match="distinct"):
        make_word_tokenizer(["a", "a"])
