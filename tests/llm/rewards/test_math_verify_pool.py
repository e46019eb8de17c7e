"""math-verify's helper process: plain scripts, hard kills, a dead or hung helper, no orphans."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import astarpo
import astarpo.llm.rewards.math_verify as mv_module
from astarpo.llm.rewards.builtin import RewardReport
from astarpo.llm.rewards.math_verify import MathVerifyReward

HANG = r"The answer is \boxed{9^{9^{9^{9^{9}}}}}"
ROOT = str(Path(astarpo.__file__).resolve().parents[1])  # the code under test

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc"),
]


def _live_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that are not zombies (read from /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def _wait_gone(pgid: int, within: float) -> list[int]:
    deadline = time.monotonic() + within
    while (left := _live_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def _run_script(tmp_path: Path, body: str, timeout: float) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "plain.py"
    script.write_text(textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize("n", [40, 500])
def test_unguarded_script_scores_every_item(tmp_path, n):
    # A TRL-style script without `if __name__ == "__main__":`; its workers must not re-run it
    # (they did: 40 items came back None with bootstrapping tracebacks, 500 never returned).
    t0 = time.monotonic()
    proc = _run_script(
        tmp_path,
        f"""
        from astarpo.llm.rewards.math_verify import math_verify_reward

        print("top level ran")
        out = math_verify_reward(["q"] * {n}, ["\\\\boxed{{3}}"] * {n}, ["3"] * {n})
        print(sum(x == 1.0 for x in out), len(out))
        """,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["top level ran", f"{n} {n}"], proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    assert time.monotonic() - t0 < 120


def test_hanging_item_is_killed_and_the_next_scored_by_a_new_worker():
    # One worker: the second item can only be scored once the hung worker is killed and replaced.
    reward = MathVerifyReward(timeout=2.0, n_workers=1)
    try:
        reward(["p"], [r"\boxed{1}"], ["1"])
        report = RewardReport()
        t0 = time.monotonic()
        out = reward(["p", "p"], [HANG, r"\boxed{5}"], ["5", "5"], report=report)
        assert out == [None, 1.0]
        assert report.counts["timeout"] == 1 and report.counts["error"] == 0
        assert time.monotonic() - t0 < 2.0 + 10.0
    finally:
        reward.close()


def test_a_killed_helper_fails_the_call_fast_and_leaves_no_orphans(caplog):
    reward = MathVerifyReward(timeout=60.0, n_workers=1)
    reward(["p"], [r"\boxed{1}"], ["1"])
    helper = reward._pool
    assert helper is not None
    box: dict = {}

    def work() -> None:
        report = RewardReport()
        box["out"] = reward(["p", "p"], [HANG, r"\boxed{1}"], ["1", "1"], report=report)
        box["report"] = report

    th = threading.Thread(target=work)
    with caplog.at_level(logging.WARNING, logger=mv_module.__name__):
        th.start()
        time.sleep(1.5)  # the worker is inside the hanging item
        os.kill(helper.pid, signal.SIGKILL)
        th.join(timeout=20)
    assert not th.is_alive()
    assert box["out"] == [None, None]
    assert box["report"].counts["error"] == 2
    assert "exited with 2 items not scored" in caplog.text
    assert _wait_gone(helper.pid, within=15) == []  # the hung worker and the forkserver too
    assert reward(["p"], [r"\boxed{2}"], ["2"]) == [1.0]  # a new helper
    assert reward._pool is not helper
    reward.close()


def test_a_hung_helper_hits_the_call_deadline(monkeypatch, caplog):
    reward = MathVerifyReward(timeout=1.0, n_workers=1)
    reward(["p"], [r"\boxed{1}"], ["1"])  # started under the real deadline
    monkeypatch.setattr(mv_module, "_START_S", 1.0)
    monkeypatch.setattr(mv_module, "_KILL_S", 0.5)
    helper = reward._pool
    assert helper is not None
    os.kill(helper.pid, signal.SIGSTOP)
    report = RewardReport()
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger=mv_module.__name__):
        out = reward(["p"], [r"\boxed{1}"], ["1"], report=report)
    elapsed = time.monotonic() - t0
    assert out == [None] and report.counts["timeout"] == 1
    assert 2.5 - 0.1 < elapsed < 2.5 + 5.0, elapsed  # 1 s + 1 round of (1 s + 0.5 s)
    assert "did not answer 1 of 1 items" in caplog.text
    assert not helper.active  # at once, not when its end of the pipe closes
    assert _wait_gone(helper.pid, within=15) == []
    monkeypatch.undo()
    assert reward(["p"], [r"\boxed{2}"], ["2"]) == [1.0]
    assert reward._pool is not helper
    reward.close()


def test_the_callers_death_stops_the_helper_and_its_workers(tmp_path):
    script = tmp_path / "caller.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import threading, time
            from astarpo.llm.rewards.math_verify import MathVerifyReward

            reward = MathVerifyReward(timeout=600, n_workers=1)
            reward(["p"], [r"\\boxed{{1}}"], ["1"])
            print(reward._pool.pid, flush=True)
            threading.Thread(target=reward, args=(["p"], [{HANG!r}], ["1"])).start()
            time.sleep(600)
            """
        )
    )
    env = dict(os.environ, PYTHONPATH=ROOT)
    caller = subprocess.Popen(
        [sys.executable, str(script)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert caller.stdout is not None
        pgid = int(caller.stdout.readline())
        time.sleep(1.5)  # the worker is inside the hanging item
        assert len(_live_members(pgid)) >= 3  # helper, forkserver, worker
    finally:
        caller.kill()
        caller.wait()
    assert _wait_gone(pgid, within=20) == []


def test_sigint_to_the_helpers_group_is_ignored():
    reward = MathVerifyReward(timeout=10.0, n_workers=1)
    try:
        reward(["p"], [r"\boxed{1}"], ["1"])
        helper = reward._pool
        assert helper is not None
        os.killpg(helper.pid, signal.SIGINT)  # the helper, its forkserver and its worker
        time.sleep(0.5)
        assert reward(["p"], [r"\boxed{2}"], ["2"]) == [1.0]
        assert reward._pool is helper and helper.active
    finally:
        reward.close()


def test_a_forked_child_starts_its_own_helper():
    reward = MathVerifyReward(timeout=10.0, n_workers=1)
    try:
        reward(["p"], [r"\boxed{1}"], ["1"])
        helper = reward._pool
        assert helper is not None
        pid = os.fork()
        if pid == 0:  # the child: score with its own helper, then leave without cleanup
            ok = reward(["p"], [r"\boxed{3}"], ["3"]) == [1.0]
            own = reward._pool is not None and reward._pool.pid != helper.pid
            os._exit(0 if ok and own else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert reward(["p"], [r"\boxed{2}"], ["2"]) == [1.0]  # the parent's helper still works
        assert reward._pool is helper
    finally:
        reward.close()
