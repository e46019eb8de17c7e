"""The scratchpad task: worked solutions, the exact reward, the rows and the task registry."""

from __future__ import annotations

import statistics

import pytest

from astarpo.llm.rewards.builtin import RewardReport
from astarpo.llm.rewards.scoring import compute_rewards, load_reward
from astarpo.llm.rewards.scratchpad import (
    final_answer,
    parse_problem,
    scratchpad_reward,
    scratchpad_solution,
)
from astarpo.llm.toy.problems import SCRATCHPAD_POSITIONS, scratchpad_task
from astarpo.llm.toy.tasks import SCRATCHPAD_DIGITS, get_task

GOLD = "d0:3+7+0=10 c1,d1:2+6+1=09 c0,d2:1+5+0=06 c0,d3:0+4+0=04 c0,ans=04690"


def test_worked_solution_by_hand():
    assert scratchpad_solution(123, 4567, 4) == GOLD
    assert scratchpad_solution(9, 9, 1) == "d0:9+9+0=18 c1,ans=18"
    assert scratchpad_solution(99, 1, 2) == "d0:9+1+0=10 c1,d1:9+0+1=10 c1,ans=100"
    with pytest.raises(ValueError, match="operands"):
        scratchpad_solution(100, 1, 2)
    assert parse_problem("0123+4567=") == (123, 4567, 4)
    assert parse_problem("123+4567=") is None  # operands of different widths
    assert parse_problem("12*34=") is None
    assert final_answer(GOLD) == 4690 and final_answer("04690") == 4690
    assert final_answer("no number") is None


def _score(completion, truncated=False, prompt="0123+4567=", gold=GOLD):
    return scratchpad_reward([prompt], [completion], [gold], truncated=[truncated])[0]


def test_reward_correct_wrong_eos_malformed_truncated():
    assert _score(GOLD) == 1.0  # correct, ended with EOS
    assert _score(GOLD, gold="4690") == 1.0  # a bare gold sum works too
    assert _score(GOLD.replace("ans=04690", "ans=04691")) == 0.0  # wrong final answer
    assert _score(GOLD, truncated=True) == 0.0  # no EOS within the budget
    # Malformed scratchpads with the right final answer cannot score.
    assert _score("ans=04690") == 0.0  # no steps
    assert _score(GOLD.replace("d1:2+6+1=09", "d1:2+6+1=08")) == 0.0  # a wrong step
    assert _score(GOLD.replace("c0,d2", "c0 d2")) == 0.0  # a broken separator
    assert _score(GOLD + ",") == 0.0  # trailing text
    assert _score(GOLD[:40], truncated=True) == 0.0  # cut mid-way
    assert _score(GOLD[:40]) == 0.0  # stopped mid-way
    # The gold must agree with the prompt.
    other = scratchpad_solution(124, 4567, 4)
    assert _score(GOLD, gold=other) == 0.0


def test_reward_unscorable_items_and_bad_calls():
    report = RewardReport()
    out = scratchpad_reward(
        ["12*34=", "0123+4567="], [GOLD, GOLD], [GOLD, "none"], truncated=[False, False],
        report=report,
    )  # fmt: skip
    assert out == [None, None]
    assert report.counts == {"unparsable_prompt": 1, "unparsable_gold": 1}
    with pytest.raises(ValueError, match="truncated"):
        scratchpad_reward(["0123+4567="], [GOLD], [GOLD])
    with pytest.raises(ValueError, match="one entry each"):
        scratchpad_reward(["0123+4567="], [GOLD], [GOLD], truncated=[False, True])


def test_builtin_name_scores_through_compute_rewards():
    fn = load_reward("scratchpad")
    assert fn is scratchpad_reward
    prompts = ["0123+4567="] * 3
    rewards, _metrics = compute_rewards(
        [fn], prompts, [GOLD, GOLD, "ans=04690"], {"answer": [GOLD] * 3},
        truncated=[False, True, False],
    )  # fmt: skip
    assert rewards.tolist() == [1.0, 0.0, 0.0]


def test_rows_are_distinct_long_and_fit_the_model(tokenizer):
    rows = scratchpad_task(300, seed=0, digits=4)
    assert len({r["prompt"] for r in rows}) == 300
    assert rows == scratchpad_task(300, seed=0, digits=4)
    for r in rows[:50]:
        a, b, d = parse_problem(r["prompt"])
        assert d == 4 and r["sum"] == f"{a + b:05d}"
        assert _score(r["answer"], prompt=r["prompt"], gold=r["answer"]) == 1.0
    lengths = [len(tokenizer(r["answer"], add_special_tokens=False)["input_ids"]) + 1 for r in rows]
    assert statistics.median(lengths) >= 64  # the gold response, EOS included
    task = get_task("scratchpad")
    assert task.max_new_tokens >= max(lengths)
    prompt_len = 2 * SCRATCHPAD_DIGITS + 2
    assert prompt_len + task.max_new_tokens <= SCRATCHPAD_POSITIONS
    assert task.model["max_position_embeddings"] == SCRATCHPAD_POSITIONS
    # Longer operands than any fine-tuning shows (a zero-pass set), still within the positions.
    long_rows = scratchpad_task(20, seed=1, digits=8)
    assert all(len(r["prompt"]) == 18 for r in long_rows)
    assert 18 + len(long_rows[0]["answer"]) + 1 <= SCRATCHPAD_POSITIONS
    with pytest.raises(ValueError, match="n must be"):
        scratchpad_task(101, digits=1)
    with pytest.raises(ValueError, match="digits"):
        scratchpad_task(1, digits=0)
    with pytest.raises(ValueError, match="unknown task"):
        get_task("nosuch")
