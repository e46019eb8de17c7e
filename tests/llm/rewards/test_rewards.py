"""Rewards: math-verify with a hard timeout, GSM8K, exact match, loading, and their sum."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from astarpo.llm.rewards.builtin import RewardReport, exact_match_reward, gsm8k_reward
from astarpo.llm.rewards.math_verify import MathVerifyReward, math_verify_reward
from astarpo.llm.rewards.scoring import compute_rewards, load_reward

HANG = r"The answer is \boxed{9^{9^{9^{9^{9}}}}}"
TIMEOUT = 2.0


@pytest.fixture(scope="module")
def mv():
    reward = MathVerifyReward(timeout=TIMEOUT, n_workers=2)
    reward(["p"], [r"\boxed{1}"], ["1"])  # start the workers outside the timed tests
    yield reward
    reward.close()


def test_math_verify_equivalent_forms(mv):
    completions = [
        r"so \boxed{1/2}",
        r"\boxed{0.5}",
        r"We get $\boxed{\frac{1}{2}}$.",
        r"\boxed{\dfrac12}",
    ]
    assert mv(["p"] * 4, completions, [r"\frac{1}{2}"] * 4) == [1.0, 1.0, 1.0, 1.0]


def test_math_verify_wrong_and_unparsable(mv):
    report = RewardReport()
    out = mv(
        ["p"] * 3, [r"\boxed{3}", "I do not know.", r"\boxed{2}"], ["2", "2", "3"], report=report
    )
    assert out == [0.0, None, 0.0]
    assert report.counts["unparsable"] == 1 and report.counts["timeout"] == 0


def test_math_verify_boxed_first(mv):
    # The last boxed answer is preferred over other numbers in the text.
    assert mv(["p"], [r"First 3 then 4, so \boxed{7}. Check: 2+2=4"], ["7"]) == [1.0]


def test_math_verify_gold_with_dollars_and_latex(mv):
    golds = [r"$\frac{1}{2 n+2}$", r"\left( 3, \frac{\pi}{2} \right)", r"\text{Evelyn}", r"\$18.90"]
    completions = [
        r"\boxed{\frac{1}{2n+2}}",
        r"\boxed{(3, \frac{\pi}{2})}",
        r"\boxed{\text{Evelyn}}",
        r"\boxed{18.9}",
    ]
    assert mv(["p"] * 4, completions, golds) == [1.0, 1.0, 1.0, 1.0]


def test_hanging_completion_scores_zero_within_timeout(mv):
    report = RewardReport()
    t0 = time.monotonic()
    out = mv(["p", "p"], [HANG, r"\boxed{5}"], ["5", "5"], report=report)
    elapsed = time.monotonic() - t0
    assert out == [None, 1.0]
    assert report.counts["timeout"] == 1
    assert elapsed < TIMEOUT + 1.5, elapsed
    # The pool replaced the killed worker and still scores.
    assert mv(["p"], [r"\boxed{5}"], ["5"]) == [1.0]


def test_hanging_completion_from_a_thread(mv):
    box: dict = {}

    def work() -> None:
        t0 = time.monotonic()
        rewards, metrics = compute_rewards(
            [mv], ["p", "p"], [HANG, r"\boxed{4}"], {"answer": ["5", "4"]}
        )
        box.update(rewards=rewards, metrics=metrics, elapsed=time.monotonic() - t0)

    th = threading.Thread(target=work)
    th.start()
    th.join(timeout=60)
    assert not th.is_alive()
    np.testing.assert_array_equal(box["rewards"], [0.0, 1.0])
    assert box["metrics"]["rewards/math_verify_reward/timeout"] == 1.0
    assert box["metrics"]["rewards/math_verify_reward/none"] == 1.0
    assert box["elapsed"] < TIMEOUT + 1.5 + 3.0  # may include one worker restart


def test_gsm8k_reward():
    completions = [
        "so #### 1,000",
        "#### 18.0",
        "the answer is 18",
        "#### -3",
        "#### 5 then #### 7",
    ]
    golds = ["1000", "Janet sells 9 eggs.\n#### 18", "18", "-3", "5"]
    report = RewardReport()
    out = gsm8k_reward(["p"] * 5, completions, golds, report=report)
    assert out == [1.0, 1.0, None, 1.0, 0.0]
    assert report.counts == {"unparsable": 1}


def test_exact_match_reward():
    assert exact_match_reward(["1+2="] * 3, ["3", " 3\n", "30"], ["3", "3", "3"]) == [1.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="one entry per completion"):
        exact_match_reward(["a"], ["3", "4"], ["3", "4"])


def test_load_reward():
    assert load_reward("gsm8k") is gsm8k_reward
    assert load_reward("astarpo.llm.rewards.builtin:exact_match_reward") is exact_match_reward
    assert load_reward("math_verify") is math_verify_reward
    with pytest.raises(ValueError, match="module:function"):
        load_reward("no_colon")
    with pytest.raises(ImportError, match="cannot import module"):
        load_reward("no_such_module_xyz:f")
    with pytest.raises(AttributeError, match="has no"):
        load_reward("astarpo.llm.rewards.builtin:nope")


def test_compute_rewards_sum_weights_and_none():
    def half(prompts, completions, **kw):
        return [0.5 if c else None for c in completions]

    rewards, metrics = compute_rewards(
        [exact_match_reward, half],
        ["a", "b", "c"],
        ["1", "2", ""],
        {"answer": ["1", "3", ""]},
        weights=[2.0, 1.0],
    )
    np.testing.assert_array_equal(rewards, [2.5, 0.5, 2.0])
    assert rewards.dtype == np.float64
    assert metrics["rewards/half/none"] == 1.0
    assert metrics["rewards/exact_match_reward/mean"] == pytest.approx(2 / 3)
    assert metrics["reward/mean"] == pytest.approx(5 / 3)


def test_compute_rewards_bad_input():
    with pytest.raises(ValueError, match="column 'answer'"):
        compute_rewards([exact_match_reward], ["a"], ["1"], {"answer": ["1", "2"]})
    with pytest.raises(ValueError, match="returned 1 values"):
        compute_rewards([lambda prompts, completions, **k: [1.0]], ["a", "b"], ["1", "2"], {})
    with pytest.raises(ValueError, match="NaN"):
        compute_rewards([lambda prompts, completions, **k: [float("nan")]], ["a"], ["1"], {})
    with pytest.raises(ValueError, match="empty"):
        compute_rewards([], ["a"], ["1"], {})


def test_worker_errors_are_counted_and_a_closed_reward_restarts():
    bad = MathVerifyReward(timeout=20, n_workers=1, float_rounding="x")  # type: ignore[arg-type]
    report = RewardReport()
    assert bad(["p"], [r"\boxed{1}"], ["1"], report=report) == [None]  # ValueError in the worker
    assert report.counts["error"] == 1
    bad.close()
    assert bad._pool is None
    bad.options["float_rounding"] = 6
    assert bad(["p"], [r"\boxed{1}"], ["1"]) == [1.0]  # a new pool after close
    bad.close()


def test_math_verify_from_many_threads_at_once(mv):
    out: dict[int, list] = {}

    def work(t: int) -> None:
        golds = [str(100 * t + i) for i in range(20)]
        completions = [rf"\boxed{{{100 * t + i + (i % 2)}}}" for i in range(20)]
        out[t] = mv(["p"] * 20, completions, golds)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert out == {t: [1.0 if i % 2 == 0 else 0.0 for i in range(20)] for t in range(6)}


def test_math_verify_reward_pickles_without_its_pool(mv):
    import pickle

    copy = pickle.loads(pickle.dumps(mv))
    assert copy._pool is None and copy.timeout == mv.timeout
    assert copy(["p"], [r"\boxed{2}"], ["2"]) == [1.0]
    copy.close()


def test_workers_outlive_the_thread_that_started_them():
    reward = MathVerifyReward(timeout=30, n_workers=1)
    th = threading.Thread(target=reward, args=(["p"], [r"\boxed{1}"], ["1"]))
    th.start()
    th.join(timeout=120)
    pool = reward._pool
    time.sleep(0.5)
    assert reward(["p"], [r"\boxed{2}"], ["2"]) == [1.0]
    assert reward._pool is pool and pool.active  # the same pool, not a restarted one
    reward.close()


def test_conversational_completions(mv):
    chat = [[{"role": "assistant", "content": "#### 7"}], [{"role": "assistant", "content": "6"}]]
    assert gsm8k_reward(["p", "p"], chat, ["7", "7"]) == [1.0, None]
    assert exact_match_reward(["p"], chat[1:], ["6"]) == [1.0]
    assert mv(["p"], [[{"role": "assistant", "content": r"\boxed{7}"}]], ["7"]) == [1.0]
