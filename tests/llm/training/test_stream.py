"""Stage 1 streamed (astarpo.llm.training.stream, a trainer extension): V* of each step's new
prompts is estimated from the reference just before the step, equals Stage 1 computed by hand,
is paid for once per prompt inside the training clock, survives a resume, and bad settings are
refused."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from toy_setup import first_digit_reward, hand_v_star, spread_reward, toy_trainer

from astarpo.llm.algorithms.astarpo import AStarPO, AStarPOConfig
from astarpo.llm.training.refresh import ReferenceRefresh, RefreshConfig
from astarpo.llm.training.stream import StreamConfig, StreamedStage1, stream_stage1_config

CONFIG = StreamConfig(n_samples=3, beta1=0.5)
REWARDS = [first_digit_reward, spread_reward]


def stream():
    """The ``extensions`` keyword of a trainer that streams Stage 1 with :data:`CONFIG`."""
    return {"extensions": [StreamedStage1(CONFIG)]}


def stream_of(trainer):
    """The trainer's StreamedStage1."""
    return next(e for e in trainer.extensions if isinstance(e, StreamedStage1))


def test_each_prompt_is_estimated_once_on_its_first_step(tokenizer, tmp_path):
    trainer = toy_trainer(tokenizer, tmp_path, table=None, rewards=REWARDS, max_steps=3, **stream())
    n_rows, batch = len(trainer.rows), trainer.args.batch_size
    assert n_rows == 2 * batch and np.isnan(trainer.v_star).all()
    seen: list[int] = []
    for t in (1, 2):
        start = trainer.order.index
        record = trainer.step()
        idx = [int(i) for i in trainer.order.permutation(0)[start : start + batch]]
        new = sorted(set(idx) - set(seen))
        seen += new
        rows = [trainer.rows[i] for i in new]
        cfg = stream_stage1_config(CONFIG, trainer.args, t)
        gen_batch = trainer.args.generation_batch_size
        expected = hand_v_star(trainer.ref_model, tokenizer, cfg, gen_batch, rows, REWARDS)
        assert len(set(expected.tolist())) > 1  # prompts of different values
        np.testing.assert_allclose(trainer.v_star[new], expected, rtol=1e-12, atol=1e-12)
        untouched = sorted(set(range(n_rows)) - set(seen))
        assert np.isnan(trainer.v_star[untouched]).all()
        assert record["stream/prompts"] == len(seen)
        assert record["stream/samples"] == len(seen) * CONFIG.n_samples
        assert record["time/stage1"] > 0 and record["time/step"] >= record["time/stage1"]
        assert record["v_star/mean"] == pytest.approx(float(trainer.v_star[idx].mean()))
    before = trainer.v_star.copy()
    record = trainer.step()  # epoch 2: every prompt has its value, nothing is sampled
    assert "time/stage1" not in record and record["stream/prompts"] == n_rows
    np.testing.assert_array_equal(trainer.v_star, before)
    assert record["stream/seconds"] == pytest.approx(stream_of(trainer).seconds)


def test_a_resumed_streamed_run_reproduces_an_uninterrupted_one(tokenizer, tmp_path):
    straight = toy_trainer(tokenizer, tmp_path / "a", table=None, max_steps=3, **stream())
    whole = [r["loss"] for r in straight.train() if "loss" in r]
    out = tmp_path / "b"
    first = toy_trainer(tokenizer, out, table=None, max_steps=1, **stream()).train()
    resumed = toy_trainer(tokenizer, out, table=None, max_steps=3, **stream())
    rest = [r["loss"] for r in resumed.train(resume=True) if "loss" in r]
    assert [r["loss"] for r in first if "loss" in r] + rest == whole and len(whole) == 3
    np.testing.assert_array_equal(resumed.v_star, straight.v_star)
    a, b = stream_of(resumed), stream_of(straight)
    assert (a.prompts, a.samples) == (b.prompts, b.samples)


def test_without_the_stream_nothing_changes(tokenizer, tmp_path):
    off = toy_trainer(tokenizer, tmp_path / "off", max_steps=2).train()
    assert not any(k.startswith("stream/") or k == "time/stage1" for r in off for k in r)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"n_samples": 0}, "n_samples must be an integer >= 1"),
        ({"n_samples": 2.0}, "n_samples must be an integer >= 1"),
        ({"beta1": 0.0}, "beta1 must be a finite number > 0"),
    ],
)
def test_bad_stream_settings_are_refused(fields, match):
    with pytest.raises(ValueError, match=match):
        StreamConfig(**fields)
    with pytest.raises(TypeError, match="needs a StreamConfig"):
        StreamedStage1({"n_samples": 3})


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({}, "a v_star_table was given too"),  # toy_trainer's default table
        ({"table": None, "temperature": 0.0}, "identical samples"),
        ({"table": None, "lora_r": 2}, "not supported with LoRA"),
    ],
)
def test_a_stream_the_trainer_cannot_run_is_refused(tokenizer, tmp_path, options, match):
    with pytest.raises(ValueError, match=match):
        toy_trainer(tokenizer, tmp_path, **stream(), **options)


def test_a_stream_and_a_refresh_cannot_be_combined(tokenizer, tmp_path):
    both = [StreamedStage1(CONFIG), ReferenceRefresh(RefreshConfig(every_steps=2))]
    with pytest.raises(ValueError, match="StreamedStage1, ReferenceRefresh all change V"):
        toy_trainer(tokenizer, tmp_path, table=None, model=object(), extensions=both)


def test_an_algorithm_without_v_star_and_torchrun_are_refused(tokenizer):
    from astarpo.llm.algorithms.grpo import GRPO, GRPOConfig

    trainer = SimpleNamespace(
        args=AStarPOConfig(), algorithm=GRPO(GRPOConfig()), distributed=False, reference=None
    )
    with pytest.raises(ValueError, match="needs an algorithm with V"):
        StreamedStage1(CONFIG).on_init(trainer)
    trainer.algorithm, trainer.distributed = AStarPO(), True
    with pytest.raises(ValueError, match="not supported under torchrun"):
        StreamedStage1(CONFIG).on_init(trainer)
    trainer.distributed = False
    StreamedStage1(CONFIG).on_init(trainer)


def test_a_resume_without_streamed_values_is_refused(tokenizer, tmp_path):
    trainer = toy_trainer(tokenizer, tmp_path, table=None, **stream())
    ext = stream_of(trainer)
    with pytest.raises(ValueError, match="holds no streamed values"):
        ext.load_state_dict(trainer, None)
    with pytest.raises(ValueError, match="holds no streamed values"):
        ext.load_state_dict(trainer, {"v": [0.0], "prompts": 1, "samples": 3, "seconds": 1.0})


def test_a_duplicate_prompt_gets_its_value_once_for_every_row(tokenizer, tmp_path):
    from toy_setup import addition_rows

    base = addition_rows(2)
    rows = [dict(r) for _ in range(3) for r in base]  # prompt j at rows j, j + 2, j + 4
    trainer = toy_trainer(
        tokenizer, tmp_path, rows=rows, table=None, rewards=REWARDS, batch_size=2, **stream()
    )
    record = trainer.step()
    first = {int(i) % 2 for i in trainer.order.permutation(0)[:2]}  # the prompts drawn
    filled = {j + k for j in first for k in (0, 2, 4)}
    assert set(np.flatnonzero(~np.isnan(trainer.v_star)).tolist()) == filled
    for j in first:
        assert len({float(trainer.v_star[j + k]) for k in (0, 2, 4)}) == 1
    assert record["stream/prompts"] == len(first)
    assert record["stream/samples"] == len(first) * CONFIG.n_samples
