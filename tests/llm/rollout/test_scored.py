"""sample_and_score: the one "generate -> repeat the rows' columns -> rewards" of Stage 1, the
trainer and evaluation."""

from __future__ import annotations

import contextlib

import pytest
from fakes import FakeGenerator

from astarpo.llm.rewards.builtin import RewardReport
from astarpo.llm.rollout import scored as scored_module
from astarpo.llm.rollout.base import Rollout, SamplingConfig
from astarpo.llm.rollout.scored import sample_and_score

ROWS = [{"prompt": "1+1=", "answer": "2", "level": 1}, {"prompt": "2+2=", "answer": "4"}]
SAMPLING = SamplingConfig(4, 1.0, 1.0)


def boxed_reward(completions, answer, report: RewardReport, **_):
    out = []
    for c, a in zip(completions, answer, strict=True):
        if c == "wrong":
            report.add("unparsable")
            out.append(None)
        else:
            out.append(1.0 if c == f"\\boxed{{{a}}}" else 0.0)
    return out


def test_columns_are_repeated_per_sample_and_rewards_come_prompt_major():
    seen = {}

    def spy(prompts, completions, answer, **kwargs):
        seen.update(prompts=prompts, answer=answer, **kwargs)
        return [float(i) for i in range(len(completions))]

    gen = FakeGenerator({r["prompt"]: r["answer"] for r in ROWS}, p_correct=1.0)
    out = sample_and_score(gen.generate, ROWS, 3, SAMPLING, 7, [spy], timeout=0)
    assert gen.calls == [(["1+1=", "2+2="], 3, 7)]
    assert seen["prompts"] == ["1+1="] * 3 + ["2+2="] * 3
    assert seen["answer"] == ["2"] * 3 + ["4"] * 3
    assert "level" not in seen  # a column only some rows have is not passed
    assert out.rewards.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert out.by_prompt.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert out.rollout.n == 3 and len(out.rollout) == 6


def test_unscored_counts_are_the_reward_counts_without_means():
    gen = FakeGenerator({r["prompt"]: r["answer"] for r in ROWS}, p_correct=0.5)
    out = sample_and_score(gen.generate, ROWS, 8, SAMPLING, 3, [boxed_reward])
    wrong = sum(c == "wrong" for c in out.rollout.completions)
    assert 0 < wrong < 16
    assert out.unscored == {
        "rewards/boxed_reward/none": float(wrong),
        "rewards/boxed_reward/unparsable": float(wrong),
    }
    assert out.metrics["reward/mean"] == pytest.approx((16 - wrong) / 16)


def test_a_generator_returning_too_few_responses_is_refused_before_scoring():
    def short(prompts, n, sampling, seed):
        return Rollout(prompts[:1], [[1]], [[2]], ["x"], [False], n=n)

    def never(**_):
        raise AssertionError("scored")

    with pytest.raises(ValueError, match=r"generator returned 1 responses for 2 prompts x 1"):
        sample_and_score(short, ROWS, 1, SAMPLING, 0, [never])


def test_phases_wrap_the_generation_and_the_scoring_in_order():
    events = []

    @contextlib.contextmanager
    def phase(name):
        events.append(f"enter {name}")
        yield
        events.append(f"exit {name}")

    def gen(prompts, n, sampling, seed):
        events.append("generate")
        return FakeGenerator({r["prompt"]: r["answer"] for r in ROWS}).generate(
            prompts, n, sampling, seed
        )

    def reward(completions, **_):
        events.append("reward")
        return [0.0] * len(completions)

    sample_and_score(gen, ROWS, 1, SAMPLING, 0, [reward], phase=phase)
    assert events == [
        "enter generate", "generate", "exit generate", "enter reward", "reward", "exit reward"
    ]  # fmt: skip


def test_stage1_the_trainer_and_evaluation_all_score_through_it(tokenizer, tmp_path, monkeypatch):
    from toy_setup import make_tiny_model, quick_config

    from astarpo.llm import eval as eval_module
    from astarpo.llm.rewards.builtin import exact_match_reward
    from astarpo.llm.stage1 import estimate as estimate_module
    from astarpo.llm.stage1.config import Stage1Config
    from astarpo.llm.training import trainer as trainer_module
    from astarpo.llm.training.trainers import AStarPOTrainer

    callers = []

    def spy_for(module):
        def spy(*args, **kwargs):
            callers.append(module.__name__)
            return scored_module.sample_and_score(*args, **kwargs)

        return spy

    for module in (eval_module, estimate_module, trainer_module):
        monkeypatch.setattr(module, "sample_and_score", spy_for(module))
    answers = {r["prompt"]: r["answer"] for r in ROWS}
    cfg = Stage1Config(n_samples=2, max_new_tokens=2, progress=False)
    estimate_module.estimate_values(FakeGenerator(answers), ROWS, exact_match_reward, cfg)
    eval_module.evaluate(FakeGenerator(answers), ROWS, [exact_match_reward], progress=False)
    rows = [{"prompt": r["prompt"], "answer": r["answer"]} for r in ROWS]
    AStarPOTrainer(
        make_tiny_model(tokenizer),
        None,
        [exact_match_reward],
        args=quick_config(tmp_path, max_steps=1, batch_size=2, max_new_tokens=2),
        train_dataset=rows,
        v_star_table={r["prompt"]: 0.0 for r in rows},
        tokenizer=tokenizer,
    ).step()
    assert callers == ["astarpo.llm.stage1.estimate", "astarpo.llm.eval",
                       "astarpo.llm.training.trainer"]  # fmt: skip
