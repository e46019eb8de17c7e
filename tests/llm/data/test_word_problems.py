"""The generated arithmetic word problems: seeded, distinct, every gold answer recomputed from
the problem's own numbers, disjoint files, and scored by math-verify as the training runs score
them."""

from __future__ import annotations

import json
import re

import pytest

from astarpo.llm.data.prompts import load_prompts
from astarpo.llm.data.word_problems import KINDS, main, word_problems, write_word_problems

# What each kind's answer is, from the numbers in the order the problem states them.
ANSWER = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "div": lambda total, friends: total // friends,
    "add_sub": lambda x, y, z: x + y - z,
    "mul_sub": lambda x, y, z: x * y - z,
}


def test_every_answer_is_the_arithmetic_of_the_problems_numbers():
    rows = word_problems(600, seed=3)
    assert {r["kind"] for r in rows} == set(KINDS)
    for r in rows:
        numbers = [int(n) for n in re.findall(r"\d+", r["problem"])]
        want = ANSWER[r["kind"]](*numbers)
        assert r["answer"] == str(want) and want >= 1, r
        if r["kind"] == "div":
            assert numbers[0] % numbers[1] == 0, r  # shared equally: no remainder


def test_seeded_distinct_and_sliceable_into_disjoint_sets():
    a, b = word_problems(300, seed=0), word_problems(300, seed=0)
    assert a == b and a != word_problems(300, seed=1)
    assert len({r["problem"] for r in a}) == 300
    assert word_problems(100, seed=0) == a[:100]  # a prefix: sizes do not reshuffle
    only = word_problems(50, seed=0, kinds=["mul"])
    assert {r["kind"] for r in only} == {"mul"}


def test_bad_arguments_are_refused(monkeypatch):
    with pytest.raises(ValueError, match="n must be >= 1"):
        word_problems(0)
    with pytest.raises(ValueError, match="non-empty subset"):
        word_problems(5, kinds=["pow"])
    from astarpo.llm.data import word_problems as module

    monkeypatch.setattr(module, "_NAMES", ("Mia", "Leo"))  # 8 x 11 operands x 2 orders
    monkeypatch.setattr(module, "_ITEMS", ("apples",))
    monkeypatch.setattr(module, "_CONTAINERS", ("boxes",))
    assert len(word_problems(170, kinds=["mul"])) == 170
    with pytest.raises(ValueError, match="cannot draw 177 distinct problems"):
        word_problems(177, kinds=["mul"])
    with pytest.raises(ValueError, match="n_train and n_test must be >= 1"):
        write_word_problems("unused", n_train=0)


def test_the_files_are_disjoint_and_load_as_math_prompts(tmp_path):
    train, test = write_word_problems(tmp_path / "wp", n_train=40, n_test=20, seed=5)
    rows = [json.loads(line) for p in (train, test) for line in p.read_text().splitlines()]
    assert rows == word_problems(60, seed=5)
    prompts = load_prompts(train)  # the "math" template: the \boxed{} instruction
    assert len(prompts) == 40 and prompts[0]["answer"] == rows[0]["answer"]
    assert prompts[0]["prompt"].endswith("output the final answer within \\boxed{}.")
    test_problems = {json.loads(line)["problem"] for line in test.read_text().splitlines()}
    assert not test_problems & {r["problem"] for r in rows[:40]}


def test_the_command_line_writes_the_files(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "--train", "7", "--test", "3", "--seed", "2"]) == 0
    assert "wrote 7 problems" in capsys.readouterr().out
    assert len((tmp_path / "test.jsonl").read_text().splitlines()) == 3
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path), "--kinds", "add,pow"])
    assert "non-empty subset" in capsys.readouterr().err


@pytest.mark.multiprocess  # the reward's worker pool
def test_math_verify_scores_the_gold_answer_right_and_another_wrong():
    pytest.importorskip("math_verify")
    from astarpo.llm.rewards.math_verify import MathVerifyReward

    rows = word_problems(6, seed=0)
    reward = MathVerifyReward(timeout=10.0, n_workers=1)
    try:
        right = [f"So the answer is \\boxed{{{r['answer']}}}." for r in rows]
        plain = [f"{r['problem'][:12]}... the total is {r['answer']}" for r in rows]
        wrong = [f"The answer is \\boxed{{{int(r['answer']) + 1}}}." for r in rows]
        answers = [r["answer"] for r in rows]
        prompts = [r["problem"] for r in rows]
        assert reward(prompts, right, answer=answers) == [1.0] * 6
        assert reward(prompts, plain, answer=answers) == [1.0] * 6  # the last number, unboxed
        assert reward(prompts, wrong, answer=answers) == [0.0] * 6
    finally:
        reward.close()
