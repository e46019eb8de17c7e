"""A full disk while saving: the checkpoint, the final model and the run config name the path
and say the disk is full (however the library words it), and a partial checkpoint never takes
the place of a whole one."""

from __future__ import annotations

import errno
import os
from collections import namedtuple

import pytest
import torch
from toy_setup import toy_trainer

import astarpo.llm.data.files as files_module
import astarpo.llm.training.checkpoint as checkpoint_module
from astarpo.llm.toy.problems import addition_task
from astarpo.llm.training.checkpoint import CheckpointError, load_checkpoint

ROWS = addition_task(4, seed=0)
Usage = namedtuple("Usage", "total used free")

#: What torch.save raised on a full tmpfs (torch 2.x): nothing says "no space".
TORCH_FULL = "[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534"


def _fail_trainer_state(monkeypatch, free: int) -> None:
    """torch.save of trainer_state.pt fails as on a full disk; ``free`` bytes left."""
    real_save = torch.save

    def save(obj, f, *args, **kwargs):
        if str(f).endswith("trainer_state.pt"):
            raise RuntimeError(TORCH_FULL)
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(checkpoint_module.torch, "save", save)
    monkeypatch.setattr(files_module.shutil, "disk_usage", lambda p: Usage(10**9, 10**9, free))


def test_a_full_disk_at_checkpoint_time_names_the_checkpoint_and_keeps_the_previous(
    tokenizer, tmp_path, monkeypatch
):
    out = tmp_path / "run"
    tr = toy_trainer(tokenizer, out, max_steps=1, batch_size=2)
    tr.train()  # writes checkpoint-1
    before = {p.name: p.read_bytes() for p in (out / "checkpoint-1").iterdir()}
    with monkeypatch.context() as m:
        _fail_trainer_state(m, free=0)
        tr.step_count = 2
        with pytest.raises(CheckpointError) as e:
            tr.save()
        msg = str(e.value)
        assert f"no space left on device at {out}: checkpoint {out / 'checkpoint-2'}" in msg
        assert f"the previous checkpoint, {out / 'checkpoint-1'}, is intact" in msg
        tr.step_count = 1  # the same step saved again: the whole one stays
        with pytest.raises(CheckpointError, match="no space left on device"):
            tr.save()
    assert sorted(p.name for p in out.iterdir() if "checkpoint" in p.name) == ["checkpoint-1"]
    assert {p.name: p.read_bytes() for p in (out / "checkpoint-1").iterdir()} == before
    load_checkpoint(out / "checkpoint-1", tr.model, tr.optimizer, tr.modules)


def test_another_write_error_is_not_called_a_full_disk(tokenizer, tmp_path, monkeypatch):
    out = tmp_path / "run"
    tr = toy_trainer(tokenizer, out, max_steps=1, batch_size=2)
    _fail_trainer_state(monkeypatch, free=10**9)
    tr.step_count = 3
    with pytest.raises(CheckpointError, match=r"writing checkpoint .*checkpoint-3 failed") as e:
        tr.save()
    assert "none came before" in str(e.value) and "no space" not in str(e.value)
    assert list(out.iterdir()) == []


def test_a_full_disk_while_saving_the_final_model_names_the_folder(
    tokenizer, tmp_path, monkeypatch
):
    from safetensors import SafetensorError

    tr = toy_trainer(tokenizer, tmp_path / "run", max_steps=1, batch_size=2)

    def full(*args, **kwargs):
        raise SafetensorError("Error while serializing: I/O error: No space left on device")

    monkeypatch.setattr(type(tr.model), "save_pretrained", full)
    target = tmp_path / "model"
    with pytest.raises(
        OSError, match=f"no space left on device while saving the model to {target}"
    ):
        tr.save_model(target)
    assert not (target / "astarpo_model.json").exists()


def test_a_full_disk_while_writing_the_run_config_names_it(tmp_path, monkeypatch):
    from astarpo.llm.training.run_dir import write_json_atomic

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    path = tmp_path / "run_config.json"
    with pytest.raises(OSError, match=f"no space left on device while writing {path}"):
        write_json_atomic(path, {"a": 1})
    assert list(tmp_path.iterdir()) == []  # no temporary file left
