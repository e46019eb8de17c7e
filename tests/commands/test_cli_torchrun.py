"""The user command under torchrun: ``torchrun --nproc_per_node 2 -m astarpo train ...``.

Runs the real launcher (``python -m torch.distributed.run``) on CPU with gloo, then the same
command in one process, and compares the logged metrics step by step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dist_setup import free_port

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]


def _metrics(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x]


def test_torchrun_train_matches_one_process(tmp_path: Path) -> None:
    from astarpo.cli import main
    from astarpo.llm.toy.problems import addition_task

    data = tmp_path / "p.jsonl"
    rows = addition_task(8, seed=0)
    data.write_text(
        "".join(json.dumps({k: r[k] for k in ("problem", "answer")}) + "\n" for r in rows)
    )
    common = ["--model", "toy", "--data", str(data), "--template", "none"]
    common += ["--reward", "exact_match", "--device", "cpu"]
    values = tmp_path / "v.jsonl"
    main(["value", *common, "--out", str(values), "--n-samples", "2", "--max-new-tokens", "3"])
    train = ["train", *common, "--v-star", str(values), "--max-steps", "2", "--batch-size", "4"]
    train += ["--max-new-tokens", "3", "--seed-chunk-size", "1", "--learning-rate", "1e-3"]
    train += ["--progress", "false", "--report-to", "none", "--save-steps", "0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    cmd += ["--master_addr", "127.0.0.1", "--master_port", str(free_port())]
    cmd += ["-m", "astarpo", *train, "--out", str(tmp_path / "two")]
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=220)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert main([*train, "--out", str(tmp_path / "one")]) == 0
    two, one = _metrics(tmp_path / "two"), _metrics(tmp_path / "one")
    steps = [r for r in two if "loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for a, b in zip(steps, [r for r in one if "loss" in r], strict=True):
        for key in ("loss", "kl", "reward/mean", "grad_norm"):
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
    # Written once: one final model, one checkpoint directory.
    assert (tmp_path / "two" / "final" / "config.json").is_file()
    assert (tmp_path / "two" / "checkpoint-2" / "model.pt").is_file()
