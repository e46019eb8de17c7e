"""report_to: every step record reaches TensorBoard, Trackio (local) and W&B (offline) alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from astarpo.llm.algorithms.astarpo import AStarPOConfig

ROOT = Path(__file__).parents[3]

# A 2-step run reporting to the three trackers, then what each of them holds, as JSON.
SCRIPT = """
import json, sys
from pathlib import Path
from toy_setup import make_tiny_model
from astarpo.llm.algorithms.astarpo import AStarPOConfig
from astarpo.llm.models.toy import make_char_tokenizer
from astarpo.llm.toy.problems import addition_task
from astarpo.llm.training.trainers import AStarPOTrainer

out = Path(sys.argv[1])
rows = addition_task(8, seed=0)
tok = make_char_tokenizer()
cfg = AStarPOConfig(output_dir=str(out), max_steps=2, batch_size=4, max_new_tokens=3,
                    save_steps=0, progress=False, seed=1, report_to=sys.argv[2].split("+"))
reward = lambda prompts, completions, answer, **_: [float(c[:1] == a[:1])
                                                    for c, a in zip(completions, answer)]
AStarPOTrainer(make_tiny_model(tok), None, [reward], args=cfg, train_dataset=rows,
               v_star_table={r["prompt"]: 0.1 for r in rows}, tokenizer=tok).train()

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
tb = EventAccumulator(str(out / "tb")).Reload()
tags = tb.Tags()["scalars"]
seen = {"tensorboard": {k: [[e.step, e.value] for e in tb.Scalars(k)] for k in tags}}
from trackio.sqlite_storage import SQLiteStorage
logs = SQLiteStorage.get_logs("astarpo-test", out.name)
seen["trackio"] = logs
import struct
from wandb.proto import wandb_internal_pb2 as pb
# The offline run file: a 7-byte header, then 32 KiB blocks of (crc, length, kind) records.
data = next(out.glob("wandb/offline-run-*/run-*.wandb")).read_bytes()
pos, buf, seen["wandb"] = 7, b"", []
while pos + 7 <= len(data):
    if 32768 - pos % 32768 < 7:
        pos += 32768 - pos % 32768
        continue
    _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
    buf, pos = buf + data[pos + 7 : pos + 7 + length], pos + 7 + length
    if kind in (1, 4):  # a whole record, or the last part of one
        rec = pb.Record()
        rec.ParseFromString(buf)
        buf = b""
        if rec.WhichOneof("record_type") == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json)
                     for i in rec.history.item}
            seen["wandb"].append({"step": items.pop("_step"), **items})
print(json.dumps(seen, default=str))
"""


@pytest.mark.e2e
def test_the_same_step_records_reach_every_tracker(tmp_path: Path) -> None:
    pytest.importorskip("trackio")
    pytest.importorskip("wandb")
    out = tmp_path / "run"
    env = dict(os.environ, OMP_NUM_THREADS="1", WANDB_MODE="offline", WANDB_SILENT="true",
               WANDB_PROJECT="astarpo-test", TRACKIO_PROJECT="astarpo-test",
               TRACKIO_DIR=str(tmp_path / "trackio"), HF_HUB_OFFLINE="1")  # fmt: skip
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests")])
    cmd = [sys.executable, "-c", SCRIPT, str(out), "tensorboard+trackio+wandb"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for key in ("loss", "kl", "reward/mean", "grad_norm"):
        expected = [[r["step"], r[key]] for r in steps]
        same(seen["tensorboard"][key], expected, 1e-6)  # float32 in TensorBoard's events
        same([[r["step"], r[key]] for r in seen["trackio"] if key in r], expected, 1e-12)
        same([[r["step"], r[key]] for r in seen["wandb"] if key in r], expected, 1e-12)


def same(got: list[list[float]], expected: list[list[float]], rel: float) -> None:
    assert [s for s, _ in got] == [s for s, _ in expected]
    assert [v for _, v in got] == pytest.approx([v for _, v in expected], rel=rel)


def test_report_to_values() -> None:
    assert AStarPOConfig().reporters == ("tensorboard",)
    assert AStarPOConfig(report_to="none").reporters == ()
    assert AStarPOConfig(report_to=["wandb", "trackio"]).reporters == ("wandb", "trackio")
    assert AStarPOConfig(report_to="tensorboard,wandb").reporters == ("tensorboard", "wandb")
    for bad in ("tb", ["none", "wandb"], "mlflow"):
        with pytest.raises(ValueError, match="report_to must be 'none' or any of"):
            AStarPOConfig(report_to=bad)
    for empty in ("", " , ", []):  # no tracker is said with 'none', never by leaving it empty
        with pytest.raises(ValueError, match=r"report_to is empty .*; give 'none' for no tracker"):
            AStarPOConfig(report_to=empty)


def test_a_tracker_that_fails_to_start_leaves_nothing_that_blocks_the_retry(
    tokenizer, tmp_path, monkeypatch
):
    """W&B failing at ``init`` (no login, no network): the error names it and the fix, and the
    run directory keeps nothing of the run, so the retry is not refused as an earlier run."""
    import importlib.machinery
    import types

    from toy_setup import toy_trainer

    def init(**kwargs):
        raise ConnectionError("wandb: not logged in")

    fake = types.ModuleType("wandb")  # what `import wandb` gives the tracker
    fake.__spec__ = importlib.machinery.ModuleSpec("wandb", None)
    fake.init = init  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "wandb", fake)
    out = tmp_path / "run"
    failed = r"report_to='wandb': wandb failed to start \(ConnectionError: wandb: not logged in\)"
    with pytest.raises(RuntimeError, match=failed):
        toy_trainer(tokenizer, out, max_steps=1, report_to="tensorboard,wandb").train()
    assert sorted(p.name for p in out.iterdir()) == []  # no run_config.json, metrics.jsonl, tb/
    toy_trainer(tokenizer, out, max_steps=1, report_to="tensorboard").train()  # the retry starts
    assert (out / "metrics.jsonl").is_file() and (out / "final").is_dir()
