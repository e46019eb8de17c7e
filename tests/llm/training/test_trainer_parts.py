"""The parts moved out of trainer.py: the saved model folder's policy, the stop signals as a
context manager, the minibatch updates, the progress bar; and trainer.py under 400 lines."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from astarpo.llm.parallel.signals import Interrupted
from astarpo.llm.training.final_model import SAVED_BY, check_model_folder
from astarpo.llm.training.preemption import TrainingSignals

ROOT = Path(__file__).resolve().parents[3]


def test_trainer_module_is_under_400_lines():
    lines = (ROOT / "astarpo" / "llm" / "training" / "trainer.py").read_text().splitlines()
    assert len(lines) < 400, len(lines)


class FakeDP:
    """The one hook TrainingSignals uses: agree on the signal (here another rank's, if set)."""

    def __init__(self, peer: int = 0):
        self.peer = peer
        self.calls: list[int | None] = []

    def agree_signal(self, received):
        self.calls.append(received)
        return max(int(received or 0), self.peer)


def test_training_signals_stop_after_a_step_with_a_checkpoint():
    saves = []

    def save():
        saves.append(1)
        return Path("out/checkpoint-3")

    dp = FakeDP()
    before = signal.getsignal(signal.SIGTERM)
    with TrainingSignals(dp, max_steps=9) as signals:
        signals.after_step(2, False, save, None)  # nothing received: goes on
        os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(Interrupted) as stopped:
            signals.after_step(3, False, save, None)
    assert signal.getsignal(signal.SIGTERM) is before  # the handlers are back after `with`
    assert stopped.value.exit_code == 143 and saves == [1]
    assert str(stopped.value) == (
        "SIGTERM after step 3 of 9: checkpoint out/checkpoint-3 written; continue with "
        "--resume (train(resume=True))."
    )
    assert dp.calls == [None, signal.SIGTERM]  # asked on every step, on every rank


def test_training_signals_agree_across_ranks_and_reuse_the_steps_checkpoint():
    saves = []
    with TrainingSignals(FakeDP(peer=signal.SIGINT), max_steps=5) as signals:
        with pytest.raises(Interrupted, match="SIGINT after step 2 of 5: checkpoint ck-2"):
            signals.after_step(2, False, lambda: saves.append(1) or Path("x"), Path("ck-2"))
        signals.after_step(5, True, lambda: saves.append(1) or Path("x"), None)  # stopping anyway
    assert saves == []


def test_model_folder_policy(tmp_path):
    check_model_folder(tmp_path / "new", owned=False)  # a new folder
    (tmp_path / "empty").mkdir()
    check_model_folder(tmp_path / "empty", owned=False)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text("{}")
    with pytest.raises(FileExistsError, match="astarpo did not write"):
        check_model_folder(mine, owned=False)
    check_model_folder(mine, owned=False, overwrite=True)
    check_model_folder(mine, owned=True)  # OUT/final: the run owns it
    (mine / SAVED_BY).write_text(json.dumps({"step": 1}))
    check_model_folder(mine, owned=False)  # written by astarpo: replaced without ceremony
    (tmp_path / "afile").write_text("x")
    with pytest.raises(FileExistsError, match="is a file, not a folder"):
        check_model_folder(tmp_path / "afile", owned=True, overwrite=True)


def test_rollout_updates_visit_every_group_once_per_epoch_in_minibatches():
    from types import SimpleNamespace

    from astarpo.llm.training.update import minibatch_order, rollout_updates

    class Batch:
        def select(self, rows):
            return rows.tolist()

    class DP:
        def shard(self, n):
            return list(range(n))

        def reduce(self, stats):
            return stats

    seen = []

    def update(rows):
        seen.append(rows)
        return {"loss": float(len(seen))}

    args = SimpleNamespace(seed=3, update_epochs=2, minibatches=2)
    out = rollout_updates(Batch(), 4, 2, 7, args, DP(), update)
    assert out == {"loss": 2.5}  # the mean of 1, 2, 3, 4
    for epoch in range(2):
        order = minibatch_order(3, 7, epoch, 4)
        for m, rows in enumerate(seen[2 * epoch : 2 * epoch + 2]):
            groups = sorted(order[2 * m : 2 * m + 2].tolist())
            assert rows == [g * 2 + j for g in groups for j in range(2)]  # whole groups
    assert sorted(r for rows in seen[:2] for r in rows) == list(range(8))


def test_progress_bar_is_one_look(monkeypatch):
    from astarpo.llm.parallel import progress

    made = []
    monkeypatch.setattr(progress, "tqdm", lambda **kw: made.append(kw) or kw)
    monkeypatch.setattr(progress.sys.stderr, "isatty", lambda: False, raising=False)
    progress.progress_bar(10, "train", "step", initial=4, enabled=False)
    assert made == [
        {"total": 10, "desc": "train", "unit": "step", "initial": 4, "disable": True,
         "mininterval": 30, "miniters": 1}
    ]  # fmt: skip
