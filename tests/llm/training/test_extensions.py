"""The trainer's extension API (astarpo.llm.training.extensions): typed hooks called at their
points, the extension's state in every checkpoint and back on resume, its settings in
run_config.json, V* and the reference changed only through ReferenceState, and what cannot be
combined refused."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch
from toy_setup import toy_trainer

from astarpo.llm.training.extensions import StepBegin, TrainerExtension
from astarpo.llm.training.reference import ReferenceState
from astarpo.llm.training.run_dir import RunDirError


class Shift(TrainerExtension):
    """Adds ``delta`` to V* of each step's rows at its start; counts its calls."""

    name = "shift"
    changes_values = True

    def __init__(self, delta: float) -> None:
        self.delta, self.calls, self.shifted = delta, [], 0

    def on_init(self, trainer: Any) -> None:
        self.calls.append("init")

    def on_train_begin(self, trainer: Any) -> None:
        self.calls.append("train_begin")

    def on_step_begin(self, trainer: Any, step: StepBegin) -> dict[str, float]:
        assert isinstance(step, StepBegin) and len(step.batch) == trainer.args.batch_size
        rows = sorted(set(step.batch))
        with step.timed("shift"):
            trainer.reference.set_values(trainer.v_star[rows] + self.delta, rows)
        self.shifted += 1
        self.calls.append(f"step{step.step}")
        return {"shift/count": float(self.shifted)}

    def on_save(self, trainer: Any) -> None:
        self.calls.append("save")

    def state_dict(self, trainer: Any) -> dict[str, Any]:
        return {"shifted": self.shifted, "v": trainer.v_star.tolist()}

    def load_state_dict(self, trainer: Any, state: Any) -> None:
        self.shifted = int(state["shifted"])
        trainer.reference.set_values(state["v"])

    def settings(self) -> dict[str, Any]:
        return {"delta": self.delta}


def test_hooks_run_in_order_and_the_state_survives_a_resume(tokenizer, tmp_path):
    straight = Shift(0.25)
    trainer = toy_trainer(tokenizer, tmp_path / "a", max_steps=3, extensions=[straight])
    whole = trainer.train()
    steps = ["step1", "save", "step2", "save", "step3"]  # save_steps=1
    assert straight.calls == ["init", "train_begin", *steps, "save"]  # the final checkpoint
    assert [r["shift/count"] for r in whole if "loss" in r] == [1.0, 2.0, 3.0]
    assert all(r["time/shift"] > 0 for r in whole if "loss" in r)
    assert not np.array_equal(trainer.v_star, trainer.reference.v_star_at_start)
    saved = json.loads((tmp_path / "a" / "run_config.json").read_text())
    assert saved["extensions"] == {"shift": {"delta": 0.25}}

    out = tmp_path / "b"
    toy_trainer(tokenizer, out, max_steps=1, extensions=[Shift(0.25)]).train()
    with pytest.raises(RunDirError, match="extensions"):  # another setting: refused by name
        toy_trainer(tokenizer, out, max_steps=3, extensions=[Shift(0.5)]).train(resume=True)
    again = Shift(0.25)
    resumed = toy_trainer(tokenizer, out, max_steps=3, extensions=[again])
    resumed.train(resume=True)
    assert again.shifted == 3 and again.calls[:2] == ["init", "train_begin"]
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in metrics if "loss" in r] == [r["loss"] for r in whole if "loss" in r]
    np.testing.assert_array_equal(resumed.v_star, trainer.v_star)


def test_v_star_and_the_reference_change_only_through_the_reference_state(tokenizer, tmp_path):
    trainer = toy_trainer(tokenizer, tmp_path)
    with pytest.raises(ValueError, match="read-only"):
        trainer.v_star[0] = 1.0
    state = trainer.reference
    state.set_values([0.5, 0.25], rows=[1, 3])
    assert trainer.v_star[1] == 0.5 and trainer.v_star[3] == 0.25 and trainer.v_star[0] == 0.1
    assert state.v_star_at_start[1] == 0.1  # the run's start is kept for its record
    for bad, match in [
        (([1.0], [0, 1]), "1 values for 2 rows"),
        (([np.inf], [0]), "finite"),
        (([1.0], [8]), "outside"),
        ((np.ones(3), None), "3 values for 8 rows"),
    ]:
        with pytest.raises(ValueError, match=match):
            state.set_values(*bad)
    policy = {k: v + 1.0 for k, v in trainer.model.state_dict().items()}
    state.set_weights(policy)
    ref = trainer.ref_model.state_dict()
    assert all(torch.equal(ref[k], policy[k]) for k in policy)
    assert not trainer.ref_model.training
    assert not any(p.requires_grad for p in trainer.ref_model.parameters())
    with pytest.raises(ValueError, match="grpo has no V"):
        ReferenceState(None, None, "grpo").set_values([1.0])
    with pytest.raises(ValueError, match="no reference module"):
        ReferenceState(None, None, "rebel").set_weights(policy)


@pytest.mark.parametrize(
    ("extensions", "error", "match"),
    [
        ([lambda r: None], TypeError, "not a TrainerExtension"),
        ([Shift(1.0), Shift(2.0)], ValueError, "'shift' is given 2 times"),
    ],
)
def test_bad_extensions_are_refused_before_any_model_is_built(
    tokenizer, tmp_path, extensions, error, match
):
    with pytest.raises(error, match=match):
        toy_trainer(tokenizer, tmp_path, model=object(), extensions=extensions)
