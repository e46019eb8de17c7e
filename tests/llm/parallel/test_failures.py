"""Multi-process failures under the real launcher (``torchrun --nproc_per_node 2``, gloo, CPU).

Faults are planted by tests/llm/faults.py (a reward or ``generate`` that stalls, raises, kills
its own process with SIGKILL or sends SIGTERM on one rank, once): every rank stops, the
stalled or failed rank is named in ``torchrun``'s failure summary, and rerunning (Stage 1) or
``--resume`` (Stage 2) gives exactly the result of an uninterrupted run. The wall times of
these cases are measured by ``experiments/benchmarks/failure_stop_times.py``, not asserted here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dist_setup import free_port

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parents[1]  # tests/llm: faults.py, fault_main.py
COMMON = ["--model", "toy", "--template", "none", "--reward", "faults:exact_reward"]
COMMON += ["--device", "cpu"]
STAGE1 = ["--n-samples", "2", "--max-new-tokens", "3", "--prompts-per-call", "1", "--no-progress"]
TRAIN = ["--max-steps", "3", "--batch-size", "4", "--max-new-tokens", "3", "--save-steps", "1"]
TRAIN += ["--learning-rate", "1e-3", "--progress", "false", "--report-to", "none"]


def torchrun(
    args: list[str], fault: str = "", mark: Path | None = None, entry: str = "-m astarpo"
) -> subprocess.CompletedProcess[str]:
    """``torchrun --nproc_per_node 2 ENTRY ARGS`` with the fault ``fault`` armed."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{ROOT}{os.pathsep}{HERE}"}
    env["ASTARPO_TEST_FAULT"] = fault
    env["ASTARPO_TEST_FAULT_MARK"] = str(mark) if mark else ""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    cmd += ["--master_addr", "127.0.0.1", "--master_port", str(free_port())]
    cmd += [*entry.split(), *args]
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=280)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prompt file and its V* table (made with the reward of faults.py)."""
    from astarpo.cli import main
    from astarpo.llm.toy.problems import addition_task

    d = tmp_path_factory.mktemp("job")
    rows = addition_task(8, seed=0)
    (d / "p.jsonl").write_text(
        "".join(json.dumps({k: r[k] for k in ("problem", "answer")}) + "\n" for r in rows)
    )
    args = ["value", *COMMON, *STAGE1, "--data", str(d / "p.jsonl"), "--out", str(d / "v.jsonl")]
    assert main(args) == 0
    return d


def train_args(job: Path, out: Path, *extra: str) -> list[str]:
    data = ["--data", str(job / "p.jsonl"), "--v-star", str(job / "v.jsonl")]
    return ["train", *COMMON, *TRAIN, *data, "--out", str(out), *extra]


def root_cause(stderr: str) -> str:
    assert "Root Cause (first observed failure)" in stderr, stderr[-3000:]
    return stderr.split("Root Cause (first observed failure)")[1]


# ------------------------------------------------------------------ 1. a rank stalls or raises


def test_a_stall_in_generate_on_one_rank_stops_every_rank_and_names_it(job: Path) -> None:
    mark = job / "stall.mark"
    t0 = time.time()
    proc = torchrun(
        train_args(job, job / "stall", "--dist-timeout", "5"),
        fault="stall:1:3",  # rank 1's third generate call: step 2 (one call per prompt)
        mark=mark,
        entry=f"{HERE / 'fault_main.py'}",
    )
    assert proc.returncode != 0
    assert mark.exists()  # the stall happened
    cause = root_cause(proc.stderr)
    assert "rank      : 1" in cause.split("\n\n")[0] or "rank      : 1 " in cause
    assert "StallError: rank 1 stalled: generate of step 2" in cause
    assert "faults.py" in cause  # the stalled rank's stack shows where it was
    # Bounded: the job ends long before the 2 x 5 s collective timeout would matter, let alone
    # this test's deadline (a liveness check; the times are measured by the benchmark script).
    assert time.time() - t0 < 250


def test_a_rank_that_raises_is_the_root_cause_with_its_traceback(job: Path) -> None:
    proc = torchrun(train_args(job, job / "raise"), fault="raise:1:2", mark=job / "raise.mark")
    assert proc.returncode != 0
    assert "error: planted failure on rank 1" in proc.stderr  # the CLI's one line
    cause = root_cause(proc.stderr)
    assert "RuntimeError: planted failure on rank 1" in cause
    assert 'faults.py", line' in cause  # the traceback (record + the CLI's error file)
    assert "To enable traceback" not in proc.stderr


# ------------------------------------------- 2 and 4. kill -9 and SIGTERM in Stage 2, resumed


@pytest.fixture(scope="module")
def clean_run(job: Path) -> Path:
    out = job / "clean"
    proc = torchrun(train_args(job, out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _same_final(a: Path, b: Path) -> None:
    assert (a / "final" / "model.safetensors").read_bytes() == (
        b / "final" / "model.safetensors"
    ).read_bytes()
    keys = ("step", "loss", "kl", "reward/mean", "grad_norm")
    ra = [{k: r.get(k) for k in keys} for r in map(json.loads, (a / "metrics.jsonl").open())]
    rb = [{k: r.get(k) for k in keys} for r in map(json.loads, (b / "metrics.jsonl").open())]
    assert ra == rb  # bitwise: the same floats


def test_kill_9_of_one_rank_then_resume_gives_the_uninterrupted_weights(
    job: Path, clean_run: Path
) -> None:
    out = job / "killed"
    proc = torchrun(train_args(job, out), fault="kill:1:2", mark=job / "kill.mark")
    assert proc.returncode != 0
    assert "Signal 9 (SIGKILL)" in proc.stderr or "SIGKILL" in proc.stderr
    assert (out / "checkpoint-1").is_dir() and not (out / "final").exists()
    proc = torchrun(train_args(job, out, "--resume"), fault="kill:1:2", mark=job / "kill.mark")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resuming" in proc.stderr
    _same_final(out, clean_run)


def test_sigterm_finishes_the_step_checkpoints_exits_143_and_resumes_exactly(
    job: Path, clean_run: Path
) -> None:
    out = job / "preempted"
    mark = job / "term.mark"
    # Rank 0 sends SIGTERM to torchrun during step 2; torchrun forwards it to both workers.
    proc = torchrun(train_args(job, out), fault="sigterm_parent:0:2", mark=mark)
    assert proc.returncode != 0
    assert "stopped by SIGTERM after step 2 of 3" in proc.stderr, proc.stderr[-3000:]
    assert (out / "checkpoint-2").is_dir() and not (out / "final").exists()
    proc = torchrun(train_args(job, out, "--resume"), fault="sigterm_parent:0:2", mark=mark)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _same_final(out, clean_run)


# --------------------------------------------- 2 and 4. kill -9 and SIGTERM in sharded Stage 1


def test_stage1_by_rank_after_kill_9_and_sigterm_reruns_to_the_same_bytes(job: Path) -> None:
    data = ["--data", str(job / "p.jsonl")]
    clean = job / "s1-clean.jsonl"
    proc = torchrun(["value", *COMMON, *STAGE1, *data, "--out", str(clean)])
    assert proc.returncode == 0, proc.stderr[-3000:]

    out = job / "s1.jsonl"
    args = ["value", *COMMON, *STAGE1, *data, "--out", str(out)]
    proc = torchrun(args, fault="kill:1:2", mark=job / "s1-kill.mark")  # rank 1's 2nd batch
    assert proc.returncode != 0 and not out.exists()
    # Rank 1 (3 prompts; 1 kept) sends SIGTERM during its 2nd batch of the rerun (its last).
    # torchrun forwards it asynchronously, so it may land before rank 1's stop check (rank 1
    # stops after the batch, "after N of M prompts"; a rank done with its shard stops at the
    # barrier, "while waiting") or after the last check, when the merge may already be done.
    # Either way the table is absent or whole, never partial.
    proc = torchrun(args, fault="sigterm_parent:1:2", mark=job / "s1-term.mark")
    assert proc.returncode != 0
    if out.exists():
        assert out.read_bytes() == clean.read_bytes()
        out.unlink()
    else:
        assert "stopped by SIGTERM in Stage 1" in proc.stderr, proc.stderr[-3000:]
    assert "resuming" in proc.stderr  # the parts kept the rows of the killed run
    proc = torchrun(args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.read_bytes() == clean.read_bytes()
