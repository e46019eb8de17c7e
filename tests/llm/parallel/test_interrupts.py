"""Interruptions: the watchdog, SIGTERM/SIGINT at a safe point, a killed merge, a full disk.

The 2-process cases use the suite's spawn helper (gloo, CPU); the torchrun cases are in
tests/llm/parallel/test_failures.py. A full disk is a 4 KiB tmpfs where this process may mount one
(root), else an injected ``OSError(ENOSPC)`` after a byte budget.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from dist_setup import free_port, set_rank_env
from fakes import FakeGenerator, boxed_match, by_rank_config, doubling_rows, stage1_by_rank
from toy_setup import toy_trainer

from astarpo.llm.data.files import append_bytes
from astarpo.llm.parallel.signals import Interrupted, StopSignals
from astarpo.llm.stage1.config import Stage1Config

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[3]


# ------------------------------------------------------------------------- the watchdog


def test_watchdog_stops_a_stalled_process_naming_rank_phase_and_step(tmp_path: Path) -> None:
    code = (
        "import time\n"
        "from astarpo.llm.parallel.watchdog import Watchdog\n"
        "w = Watchdog(0.5, rank=3, poll_s=0.05)\n"
        "with w.phase('ref_logprobs', 2):\n"
        "    pass\n"
        "with w.phase('generate', 7):\n"
        "    time.sleep(60)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TORCHELASTIC_ERROR_FILE": str(tmp_path / "e")}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 1
    assert "error: rank 3 stalled: generate of step 7 has run for" in proc.stderr
    assert "dist_timeout=0.5 s" in proc.stderr
    assert 'rank 3 was here:\n  File "<string>", line 7' in proc.stderr  # its stack
    error = json.loads((tmp_path / "e").read_text())["message"]  # torchrun's error file
    assert error["message"].startswith("StallError: rank 3 stalled: generate of step 7")


def test_dist_timeout_is_validated_and_disabled_in_one_process() -> None:
    from astarpo.llm.algorithms.astarpo import AStarPOConfig
    from astarpo.llm.parallel.watchdog import Watchdog

    assert AStarPOConfig().dist_timeout == 900.0
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="dist_timeout"):
            AStarPOConfig(dist_timeout=bad)
    w = Watchdog(1e-3, rank=0, enabled=False)
    with w.phase("generate", 1):
        pass
    assert w._thread is None  # one process: no thread, nothing timed


def test_a_rank_failed_by_its_peer_waits_for_torchrun_and_no_other_error_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from astarpo.llm.parallel import watchdog

    gloo = "[gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:22957."
    peer = [RuntimeError(gloo), RuntimeError("Read error: Connection reset by peer")]
    own = [RuntimeError("planted failure on rank 1"), ValueError("closed by peer"), OSError()]
    assert all(map(watchdog.is_peer_failure, peer))
    assert not any(map(watchdog.is_peer_failure, own))
    slept: list[float] = []
    monkeypatch.setattr(watchdog.time, "sleep", slept.append)
    monkeypatch.delenv("TORCHELASTIC_ERROR_FILE", raising=False)
    watchdog.outlive_failed_peer(peer[0])  # not under torchrun: nothing to wait for
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", "/nonexistent/error.json")
    for e in own:
        watchdog.outlive_failed_peer(e)
    assert slept == []
    watchdog.outlive_failed_peer(peer[1], seconds=3.0)
    assert slept == [3.0]


# --------------------------------------------------------- SIGTERM / SIGINT at a safe point


def test_stop_signals_record_the_first_signal_and_restore_handlers() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with StopSignals("the test") as s:
        os.kill(os.getpid(), signal.SIGTERM)
        assert s.received == signal.SIGTERM  # recorded, the process lives on
        assert signal.getsignal(signal.SIGTERM) is before  # a second one acts at once
    assert signal.getsignal(signal.SIGTERM) is before
    assert Interrupted(signal.SIGTERM, "x").exit_code == 143
    assert Interrupted(signal.SIGINT, "x").exit_code == 130


def test_nested_stop_signals_record_in_every_context_and_a_second_signal_acts_at_once() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with StopSignals("outer") as outer:
        with StopSignals("inner") as inner:
            os.kill(os.getpid(), signal.SIGTERM)
            assert inner.received == outer.received == signal.SIGTERM
            assert signal.getsignal(signal.SIGTERM) is before  # not the outer's handler
        assert signal.getsignal(signal.SIGTERM) is before
    assert signal.getsignal(signal.SIGTERM) is before
    with StopSignals("outer") as outer:
        with StopSignals("inner") as inner:
            pass
        assert signal.getsignal(signal.SIGTERM) == outer._handle  # back to the outer's
        os.kill(os.getpid(), signal.SIGINT)  # between inner contexts: the outer records it
        assert (inner.received, outer.received) == (None, signal.SIGINT)
    assert signal.getsignal(signal.SIGTERM) is before


def test_stop_signals_wait_returns_a_signal_sent_meanwhile_or_none_after_the_timeout() -> None:
    import threading
    import time

    with StopSignals("the test") as s:
        assert s.wait(0.05) is None
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
        t0 = time.monotonic()
        assert s.wait(10.0) == signal.SIGTERM
        assert time.monotonic() - t0 < 5.0  # returned when it came, not at the timeout


def test_stage1_signal_after_the_last_batchs_check_still_stops_with_every_row_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from astarpo.llm.stage1.estimate import estimate_values
    from astarpo.llm.stage1.table import ValueTable

    rows = doubling_rows(4)
    gen = FakeGenerator({r["prompt"]: r["answer"] for r in rows})
    real_fsync = os.fsync

    def fsync_then_sigterm(fd: int) -> None:  # after the loop: its checks are all behind
        real_fsync(fd)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(os, "fsync", fsync_then_sigterm)
    cfg = Stage1Config(n_samples=2, beta1=0.5, max_new_tokens=8, prompts_per_call=2, progress=False)
    with pytest.raises(Interrupted, match="SIGTERM in Stage 1 after 4 of 4 prompts") as e:
        estimate_values(gen, rows, [boxed_match], cfg, out_path=tmp_path / "v.jsonl")
    assert e.value.exit_code == 143
    assert len(ValueTable.load(tmp_path / "v.jsonl")) == 4


SENT: dict[str, int] = {}


def sigint_at_step_2(completions: list[str], answer: list[str], **_: Any) -> list[float]:
    """First digit matches; sends SIGINT to this process on its second call (once)."""
    SENT["calls"] = SENT.get("calls", 0) + 1
    if SENT["calls"] == 2 and not SENT.get("sent"):
        SENT["sent"] = 1
        os.kill(os.getpid(), signal.SIGINT)
    return [1.0 if c[:1] == a[:1] else 0.0 for c, a in zip(completions, answer, strict=True)]


# The trainer of the SIGINT tests: 3 steps, the reward that sends SIGINT at step 2.
signalled_trainer = functools.partial(
    toy_trainer, rewards=[sigint_at_step_2], max_steps=3, save_steps=0
)


def _same_weights(a: Any, b: Any) -> None:
    for (n, x), (_, y) in zip(
        a.model.state_dict().items(), b.model.state_dict().items(), strict=True
    ):
        assert torch.equal(x, y), n


def test_sigint_finishes_the_step_checkpoints_and_resume_is_exact(
    tokenizer: Any, tmp_path: Path
) -> None:
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN under a shell's background job
    SENT.clear()
    SENT["sent"] = 1  # the clean run: no signal
    clean = signalled_trainer(tokenizer, tmp_path / "clean")
    clean.train()
    SENT.clear()
    tr = signalled_trainer(tokenizer, tmp_path / "run")
    with pytest.raises(Interrupted, match="SIGINT after step 2 of 3: checkpoint") as e:
        tr.train()
    assert e.value.exit_code == 130
    assert (tmp_path / "run" / "checkpoint-2").is_dir()  # save_steps=0, yet saved
    assert not (tmp_path / "run" / "final").exists()
    assert signal.getsignal(signal.SIGINT) is before  # restored
    resumed = signalled_trainer(tokenizer, tmp_path / "run")
    resumed.train(resume=True)
    _same_weights(resumed, clean)


# ---------------------------------------------- a signal inside a step's own Stage 1 (issue 61)

ARMED: dict[str, int] = {}


def sigint_once_armed(completions: list[str], answer: list[str], **_: Any) -> list[float]:
    """First digit matches; sends SIGINT to this process on its first call once armed (the
    first call of the step after the one that armed it: that step's Stage 1)."""
    if ARMED.get("at") is not None and ARMED.get("done", -1) >= ARMED["at"] and "sent" not in ARMED:
        ARMED["sent"] = 1
        os.kill(os.getpid(), signal.SIGINT)
    return [1.0 if c[:1] == a[:1] else 0.0 for c, a in zip(completions, answer, strict=True)]


class Arm:
    """A callback that arms :func:`sigint_once_armed` once step ``ARMED["at"]`` has ended."""

    def on_step_end(self, record: dict[str, Any]) -> None:
        ARMED["done"] = int(record["step"])


def _extensions(kind: str) -> list[Any]:
    from astarpo.llm.training.refresh import ReferenceRefresh, RefreshConfig
    from astarpo.llm.training.stream import StreamConfig, StreamedStage1

    if kind == "stream":
        return [StreamedStage1(StreamConfig(n_samples=2))]
    return [ReferenceRefresh(RefreshConfig(every_steps=1, n_samples=2))]


def _stage1_trainer(tokenizer: Any, out: Path, kind: str) -> Any:
    """2 steps of 4 of 8 prompts, no periodic checkpoint; ``kind``: the streamed Stage 1 (each
    step estimates its 4 prompts) or a refresh after every step (step 2 begins with one)."""
    table = None if kind == "stream" else ...
    return toy_trainer(
        tokenizer,
        out,
        table=table,
        rewards=[sigint_once_armed],
        max_steps=2,
        save_steps=0,
        callbacks=[Arm()],
        extensions=_extensions(kind),
    )


@pytest.mark.parametrize(
    ("kind", "at"), [("stream", 1), ("stream", 0), ("refresh", 1)], ids=["stream", "step1", "ref"]
)
def test_sigint_in_a_steps_stage1_saves_the_finished_steps_and_resume_is_exact(
    tokenizer: Any, tmp_path: Path, kind: str, at: int
) -> None:
    from astarpo.llm.training.metrics import read_metrics

    before = signal.getsignal(signal.SIGINT)
    ARMED.clear()
    clean = _stage1_trainer(tokenizer, tmp_path / "clean", kind)
    clean.train()
    ARMED.clear()
    ARMED["at"], ARMED["done"] = at, 0  # step at + 1's Stage 1 gets SIGINT
    out = tmp_path / "run"
    tr = _stage1_trainer(tokenizer, out, kind)
    with pytest.raises(
        Interrupted, match=f"SIGINT in Stage 1 .*step {at + 1} of 2 was stopped"
    ) as e:
        tr.train()
    assert e.value.exit_code == 130
    assert f"checkpoint {out / f'checkpoint-{at}'} (step {at})" in str(e.value)
    assert "--resume" in str(e.value)
    assert [p.name for p in out.glob("checkpoint-*")] == [f"checkpoint-{at}"]  # save_steps=0
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl") if "loss" in r] == [1][:at]
    assert signal.getsignal(signal.SIGINT) is before
    ARMED.clear()
    resumed = _stage1_trainer(tokenizer, out, kind)
    resumed.train(resume=True)
    losses = [
        [r["loss"] for r in read_metrics(d / "metrics.jsonl") if "loss" in r]
        for d in (tmp_path / "clean", out)
    ]
    assert losses[0] == losses[1] and len(losses[0]) == 2
    np.testing.assert_array_equal(resumed.v_star, clean.v_star)
    _same_weights(resumed, clean)


def test_stage1_sigint_writes_the_finished_batches_and_a_rerun_completes(tmp_path: Path) -> None:
    from astarpo.llm.stage1.estimate import estimate_values
    from astarpo.llm.stage1.table import ValueTable

    rows = doubling_rows(6)
    gen = FakeGenerator({r["prompt"]: r["answer"] for r in rows})

    def run(out: Path) -> Any:
        return estimate_values(
            gen,
            rows,
            [sigint_at_step_2],
            Stage1Config(n_samples=4, beta1=0.5, max_new_tokens=8, seed=3, prompts_per_call=2),
            out_path=out,
        )

    SENT.clear()
    SENT["sent"] = 1
    run(tmp_path / "clean.jsonl")
    SENT.clear()
    with pytest.raises(Interrupted, match="SIGINT in Stage 1 after 4 of 6 prompts") as e:
        run(tmp_path / "v.jsonl")
    assert e.value.exit_code == 130
    assert len(ValueTable.load(tmp_path / "v.jsonl")) == 4  # batch 2 finished and written
    run(tmp_path / "v.jsonl")
    assert (tmp_path / "v.jsonl").read_bytes() == (tmp_path / "clean.jsonl").read_bytes()


# ------------------------------------------------------------- an interrupted merge of shards


def _die(*_: Any, **__: Any) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _merge_worker(rank: int, world: int, port: int, out: str, kill_at_rename: bool) -> None:
    from astarpo.llm.parallel.dist import cleanup_distributed

    set_rank_env(rank, world, port)
    if kill_at_rename and rank == 0:
        os.replace = _die  # the merged table is written; killed before it is renamed
    stage1_by_rank(Path(out))
    cleanup_distributed()


@pytest.mark.slow
def test_a_merge_killed_on_rank_0_leaves_no_partial_table_and_a_rerun_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "v.jsonl"
    with pytest.raises(mp.ProcessExitedException):  # rank 0 got SIGKILL inside the merge
        mp.spawn(_merge_worker, args=(2, free_port(), str(out), True), nprocs=2, join=True)
    assert not out.exists()  # absent, never partial
    mp.spawn(_merge_worker, args=(2, free_port(), str(out), False), nprocs=2, join=True)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    stage1_by_rank(tmp_path / "one.jsonl")  # one process, same rows
    got = [json.loads(x) for x in out.read_text().splitlines()]
    want = [json.loads(x) for x in (tmp_path / "one.jsonl").read_text().splitlines()]
    assert [(r["prompt"], r["v_star"]) for r in got] == [(r["prompt"], r["v_star"]) for r in want]


def _late_sigterm_worker(rank: int, world: int, port: int, out: str, tmp: str) -> None:
    """Rank 1 sends SIGTERM to both ranks once its last batch's check is behind it (during
    the final fsync), while rank 0, done with its shard, waits at the barrier."""
    from astarpo.llm.parallel.dist import cleanup_distributed

    set_rank_env(rank, world, port)
    Path(tmp, f"pid-{rank}").write_text(str(os.getpid()))
    if rank == 1:
        real_fsync = os.fsync

        def fsync_then_sigterm(fd: int) -> None:
            real_fsync(fd)
            os.kill(int(Path(tmp, "pid-0").read_text()), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)

        os.fsync = fsync_then_sigterm  # type: ignore[assignment]
    try:
        stage1_by_rank(Path(out))
        outcome = "finished"
    except Interrupted as e:
        outcome = f"{e.exit_code} {e}"
    Path(tmp, f"outcome-{rank}").write_text(outcome)
    cleanup_distributed()


@pytest.mark.slow
def test_stage1_by_rank_sigterm_after_the_last_check_stops_every_rank_with_the_rows_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from astarpo.llm.stage1.shards import part_path

    out = tmp_path / "v.jsonl"
    mp.spawn(
        _late_sigterm_worker, args=(2, free_port(), str(out), str(tmp_path)), nprocs=2, join=True
    )
    got = {r: (tmp_path / f"outcome-{r}").read_text() for r in range(2)}
    assert got[1].startswith("143 SIGTERM in Stage 1 after"), got  # the late signal counted
    assert got[0].startswith("143 SIGTERM in Stage 1"), got  # "while waiting" (or a batch)
    assert not out.exists() and part_path(out, 1, 2).exists()
    mp.spawn(_merge_worker, args=(2, free_port(), str(out), False), nprocs=2, join=True)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    stage1_by_rank(tmp_path / "one.jsonl")  # one process, same rows
    assert out.read_bytes() == (tmp_path / "one.jsonl").read_bytes()


def test_merge_command_killed_mid_write_leaves_no_partial_table(tmp_path: Path) -> None:
    from astarpo.llm.stage1.estimate import estimate_values
    from astarpo.llm.stage1.shards import part_path

    for i in range(2):
        rows = doubling_rows()
        estimate_values(
            FakeGenerator({r["prompt"]: r["answer"] for r in rows}),
            rows,
            [boxed_match],
            by_rank_config(),
            out_path=tmp_path / "v.jsonl",
            shard=(i, 2),
        )
    assert part_path(tmp_path / "v.jsonl", 1, 2).is_file()
    code = (
        "import os, signal, sys\n"
        "from astarpo.llm.stage1 import rows\n"
        "calls = []\n"
        "real = rows.ValueRow.to_json\n"
        "def to_json(self):\n"
        "    calls.append(1)\n"
        "    if len(calls) == 5:\n"  # 4 of the 10 merged rows written
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return real(self)\n"
        "rows.ValueRow.to_json = to_json\n"
        "from astarpo.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    merge = ["value", "--merge", "2", "--out", str(tmp_path / "v.jsonl")]
    proc = subprocess.run([sys.executable, "-c", code, *merge], env=env, capture_output=True)
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "v.jsonl").exists()
    proc = subprocess.run([sys.executable, "-m", "astarpo", *merge], env=env, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert len((tmp_path / "v.jsonl").read_text().splitlines()) == 10


# ---------------------------------------------------------------------------- a full disk


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[tuple[Path, bool]]:
    """A directory on a 4 KiB tmpfs (one page; root only), else a plain one (inject ENOSPC)."""
    d = tmp_path / "disk"
    d.mkdir()
    mounted = False
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("mount"):
        cmd = ["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(d)]
        mounted = subprocess.run(cmd, capture_output=True).returncode == 0
    try:
        yield d, mounted
    finally:
        if mounted:
            subprocess.run(["umount", str(d)], check=True)


def _fill_up(budget: int) -> None:
    """Make this process's writes under a ``disk`` folder fail with ENOSPC past ``budget``
    bytes, the last write partly done (as on a real full disk)."""
    real = os.write
    used = [0]

    def write(fd: int, data: Any) -> int:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if "/disk/" not in target:
            return real(fd, data)
        room = budget - used[0]
        if room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = real(fd, bytes(data)[:room])
        used[0] += n
        return n

    os.write = write


def _disk_worker(rank: int, world: int, port: int, out: str, inject: bool) -> None:
    from astarpo.llm.parallel.dist import cleanup_distributed

    set_rank_env(rank, world, port)
    if inject:
        _fill_up(1000)
    stage1_by_rank(Path(out))
    cleanup_distributed()


def test_append_bytes_undoes_a_partial_write_on_a_full_disk(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    path = disk / "t.jsonl"
    append_bytes(path, b'{"a": 1}\n')
    real = os.write
    _fill_up(4)
    try:
        with pytest.raises(OSError, match=f"no space left on device while appending to {path}"):
            append_bytes(path, b'{"b": 2}\n', then="do this.")
    finally:
        os.write = real
    assert path.read_bytes() == b'{"a": 1}\n'  # the partial 4 bytes were cut off


@pytest.mark.slow
def test_stage1_by_rank_on_a_full_disk_names_the_file_keeps_the_rows_and_resumes(
    small_disk: tuple[Path, bool], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from astarpo.llm.stage1.rows import read_table_rows
    from astarpo.llm.stage1.shards import part_path

    disk, mounted = small_disk
    out = disk / "v.jsonl"
    with pytest.raises(mp.ProcessRaisedException, match="no space left on device while appending"):
        mp.spawn(_disk_worker, args=(2, free_port(), str(out), not mounted), nprocs=2, join=True)
    kept = 0
    for i in range(2):
        p = part_path(out, i, 2)
        if p.exists():
            rows, good = read_table_rows(p)
            assert good == len(p.read_bytes())  # every byte in whole rows: no torn line
            kept += len(rows)
            shutil.copy(p, part_path(tmp_path / "v.jsonl", i, 2))
    assert 0 < kept < len(doubling_rows())
    # Space freed (the parts moved to a roomy disk): the same command resumes and completes.
    mp.spawn(_disk_worker, args=(2, free_port(), str(tmp_path / "v.jsonl"), False), nprocs=2)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    stage1_by_rank(tmp_path / "one.jsonl")
    assert (tmp_path / "v.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()


def test_metrics_on_a_full_disk_names_the_file_and_resume_continues(
    tokenizer: Any, tmp_path: Path
) -> None:
    from astarpo.llm.training.metrics import read_metrics

    SENT.clear()
    SENT["sent"] = 1
    clean = signalled_trainer(tokenizer, tmp_path / "clean", save_steps=1)
    clean.train()
    out = tmp_path / "disk"
    tr = signalled_trainer(tokenizer, out, save_steps=1)
    real = os.write
    lines = []

    def write(fd: int, data: Any) -> int:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("metrics.jsonl"):
            lines.append(1)
            if len(lines) == 3:  # step 3's record: half written, then the disk is full
                real(fd, bytes(data)[:10])
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    os.write = write
    try:
        with pytest.raises(OSError, match=f"no space left on device while appending to {out}"):
            tr.train()
    finally:
        os.write = real
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [1, 2]  # intact
    resumed = signalled_trainer(tokenizer, out, save_steps=1)
    resumed.train(resume=True)
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [1, 2, 3]
    _same_weights(resumed, clean)


@pytest.mark.slow
def test_cli_exits_143_after_sigterm_in_stage_1_and_in_stage_2(tmp_path: Path) -> None:
    from astarpo.llm.toy.problems import addition_task

    rows = addition_task(8, seed=0)
    data = tmp_path / "p.jsonl"
    data.write_text(
        "".join(json.dumps({k: r[k] for k in ("problem", "answer")}) + "\n" for r in rows)
    )
    common = ["--model", "toy", "--data", str(data), "--template", "none", "--device", "cpu"]
    common += ["--reward", "faults:exact_reward", "--max-new-tokens", "3"]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{Path(__file__).parents[1]}"}
    env["OMP_NUM_THREADS"] = "1"

    def astarpo(*args: str, fault: str = "") -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "astarpo", *args]
        run_env = {**env, "ASTARPO_TEST_FAULT": fault}
        return subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=240)

    value = [
        "value",
        *common,
        "--n-samples",
        "2",
        "--prompts-per-call",
        "2",
        "--out",
        str(tmp_path / "v.jsonl"),
    ]
    proc = astarpo(*value, "--no-progress", fault="sigterm:0:2")
    assert proc.returncode == 143, proc.stderr
    assert "stopped by SIGTERM in Stage 1 after 4 of 8 prompts: their rows are in" in proc.stderr
    assert astarpo(*value, "--no-progress").returncode == 0  # resumed
    train = ["train", *common, "--v-star", str(tmp_path / "v.jsonl"), "--max-steps", "3"]
    train += ["--batch-size", "4", "--save-steps", "0", "--out", str(tmp_path / "run")]
    proc = astarpo(*train, fault="sigterm:0:2")
    assert proc.returncode == 143, proc.stderr
    assert "received SIGTERM: finishing the current step and a checkpoint" in proc.stderr
    assert "stopped by SIGTERM after step 2 of 3: checkpoint" in proc.stderr
    assert (tmp_path / "run" / "checkpoint-2").is_dir()


@pytest.mark.slow
def test_cli_sigint_in_streamed_stage1_keeps_the_finished_steps_and_names_the_resume(
    tmp_path: Path,
) -> None:
    """Issue 61, lost 1: Ctrl-C during step 2's streamed Stage 1 (the reward's third call:
    step 1's Stage 1, step 1's rollout, step 2's Stage 1) exits 130 with checkpoint-1 written
    (save_steps 0) and the command that continues; that command finishes the run."""
    import shlex

    from astarpo.llm.toy.problems import addition_task

    data = tmp_path / "p.jsonl"
    rows = addition_task(8, seed=0)
    data.write_text(
        "".join(json.dumps({k: r[k] for k in ("problem", "answer")}) + "\n" for r in rows)
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{Path(__file__).parents[1]}"}
    env["OMP_NUM_THREADS"] = "1"
    argv = ["train", "--model", "toy", "--data", str(data), "--template", "none"]
    argv += ["--device", "cpu", "--reward", "faults:exact_reward", "--max-new-tokens", "3"]
    argv += ["--stream-stage1", "true", "--stream-n-samples", "2", "--max-steps", "3"]
    argv += ["--batch-size", "4", "--save-steps", "0", "--progress", "false"]
    argv += ["--report-to", "none", "--out", str(tmp_path / "run")]

    def astarpo(args: list[str], fault: str = "") -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "astarpo", *args]
        run_env = {**env, "ASTARPO_TEST_FAULT": fault}
        return subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=240)

    proc = astarpo(argv, fault="sigint:0:3")
    assert proc.returncode == 130, proc.stderr
    assert "stopped by SIGINT in Stage 1 after 4 of 4 prompts (step 2 of 3 was stopped" in (
        proc.stderr
    )
    assert [p.name for p in (tmp_path / "run").glob("checkpoint-*")] == ["checkpoint-1"]
    again = shlex.split(proc.stderr.split("To continue: ")[1].strip())
    assert again[:2] == ["astarpo", "train"] and again[-1] == "--resume", again
    proc = astarpo(again[1:])
    assert proc.returncode == 0, proc.stderr
    steps = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in steps if "loss" in r] == [1, 2, 3]
    assert (tmp_path / "run" / "final").is_dir()
