from __future__ import annotations

import copy
import functools
import json

import numpy as np
import pytest
import torch
from fakes import record_batches
from toy_setup import comparison_run, first_digit_reward, toy_trainer

from astarpo.llm.algorithms.astarpo import AStarPO, AStarPOConfig
from astarpo.llm.algorithms.base import Algorithm, RolloutBatch
from astarpo.llm.models.logprobs import sequence_logprobs
from astarpo.llm.rewards.builtin import exact_match_reward
from astarpo.llm.stage1.table import lookup_v_star
from astarpo.llm.toy.problems import addition_task
from astarpo.objective import advantage_regression_loss

# This file's runs: 24 prompts, 8 per step in 2 minibatches, two rewards, a separate reference.
RUN = comparison_run()
make_trainer = functools.partial(toy_trainer, **RUN)
ROWS, TABLE = RUN["rows"], RUN["table"]


def test_astarpo_satisfies_protocol():
    assert isinstance(AStarPO(), Algorithm)
    assert AStarPO().samples_per_prompt == 1


def test_loss_equals_core_function_on_same_tensors(tokenizer, tmp_path):
    tr = make_trainer(tokenizer, tmp_path, minibatches=1, max_steps=1, beta2=0.05)
    batches = record_batches(tr)
    before = copy.deepcopy(tr.model)
    rec = tr.step()
    b = batches[-1]
    assert b is not None and len(b) == 8
    with torch.no_grad():
        logp = sequence_logprobs(before, b.packed).logp
        logp_ref = sequence_logprobs(tr.ref_model, b.packed).logp
    torch.testing.assert_close(b.logp_ref, logp_ref)
    # Rewards are the sum of both functions on the decoded completions.
    by_prompt = {r["prompt"]: r["answer"] for r in ROWS}
    answers = [by_prompt[p] for p in b.prompts]
    expected_r = np.add(
        first_digit_reward(b.prompts, b.completions, answers),
        exact_match_reward(b.prompts, b.completions, answers),
    )
    np.testing.assert_allclose(b.rewards.numpy(), expected_r)
    np.testing.assert_allclose(b.v_star.numpy(), [TABLE[p] for p in b.prompts], rtol=1e-6)
    core = advantage_regression_loss(logp, logp_ref, b.rewards, b.v_star, 0.05, "mean")
    assert rec["loss"] == pytest.approx(float(core), rel=1e-6)
    assert rec["kl"] == pytest.approx(float((logp - logp_ref).mean()), abs=1e-6)
    adv = b.rewards - b.v_star
    assert rec["advantage/mean"] == pytest.approx(float(adv.mean()), abs=1e-6)
    # The update moved the policy but never the reference.
    assert not torch.equal(before.lm_head.weight, tr.model.lm_head.weight)
    assert all(not p.requires_grad for p in tr.ref_model.parameters())


def test_astarpo_prepare_logs_the_advantage_and_stores_none(tokenizer, tmp_path):
    """r - V* is computed in one place for the update, inside the loss; prepare only logs it."""
    tr = make_trainer(tokenizer, tmp_path, minibatches=1, max_steps=1)
    batches = record_batches(tr)
    rec = tr.step()
    b = batches[-1]
    assert "advantage" not in b.extra
    adv = b.rewards - b.v_star
    assert rec["advantage/mean"] == pytest.approx(float(adv.mean()), abs=1e-6)
    assert rec["advantage/std"] == pytest.approx(float(adv.std(unbiased=False)), abs=1e-6)
    metrics = AStarPO().prepare(b)
    assert metrics == {
        "advantage/mean": pytest.approx(float(adv.mean()), abs=1e-6),
        "advantage/std": pytest.approx(float(adv.std(unbiased=False)), abs=1e-6),
    }
    assert "advantage" not in b.extra


def test_micro_batches_accumulate_to_the_full_minibatch(tokenizer, tmp_path):
    a = make_trainer(tokenizer, tmp_path / "a", max_steps=1, minibatches=1)
    b = make_trainer(tokenizer, tmp_path / "b", max_steps=1, minibatches=1, micro_batch_size=3)
    ra, rb = a.step(), b.step()
    assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-5)
    assert ra["grad_norm"] == pytest.approx(rb["grad_norm"], rel=1e-4)
    for pa, pb in zip(a.model.parameters(), b.model.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, atol=1e-6, rtol=1e-5)


def test_resume_reproduces_uninterrupted_run(tokenizer, tmp_path):
    full = make_trainer(tokenizer, tmp_path / "full", entropy_coef=0.01)
    full_hist = full.train()
    part = make_trainer(tokenizer, tmp_path / "part", max_steps=2, entropy_coef=0.01)
    part.train()
    resumed = make_trainer(tokenizer, tmp_path / "part", entropy_coef=0.01)
    resumed.train(resume=True)
    assert resumed.step_count == 4
    lines = [json.loads(x) for x in (tmp_path / "part" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [1, 2, 3, 4]
    for a, b in zip(full_hist, lines, strict=True):
        assert a["loss"] == b["loss"] and a["reward/mean"] == b["reward/mean"]
    for pa, pb in zip(full.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert (full.order.epoch, full.order.index) == (resumed.order.epoch, resumed.order.index)


def test_metrics_and_checkpoints_written(tokenizer, tmp_path):
    tr = make_trainer(tokenizer, tmp_path, max_steps=2, report_to="tensorboard", eval_steps=1)
    calls = []
    tr.eval_fn = lambda model: calls.append(model.training) or {"acc": 0.5}
    hist = tr.train()
    steps = [r for r in hist if "loss" in r]
    evals = [r for r in hist if "eval/acc" in r]
    assert len(steps) == 2 and len(evals) == 3  # before, after step 1, at the end
    needed = [
        "reward/mean", "v_star/mean", "advantage/mean", "advantage/std", "loss", "kl",
        "response_length/mean", "truncation_rate", "time/generate", "time/reward",
        "time/ref_logprobs", "time/update", "memory/rss_peak_mb", "grad_norm",
    ]  # fmt: skip
    for key in needed:
        assert all(np.isfinite(r[key]) for r in steps), key
    assert 0 <= steps[0]["truncation_rate"] <= 1
    assert (tmp_path / "checkpoint-2" / "model.pt").exists()
    assert any((tmp_path / "tb").iterdir())


def test_data_order_covers_each_prompt_once_per_epoch(tokenizer, tmp_path):
    tr = make_trainer(tokenizer, tmp_path)
    seen = [i for _ in range(3) for i in tr.order.take(tr.args.batch_size)]
    assert sorted(seen) == list(range(24))
    assert seen != list(range(24))
    tr2 = make_trainer(tokenizer, tmp_path)
    assert [i for _ in range(3) for i in tr2.order.take(tr2.args.batch_size)] == seen


def test_minibatch_shuffle_is_seeded_by_its_own_named_tag(tokenizer, tmp_path, monkeypatch):
    from astarpo.llm.rollout.base import derive_seed
    from astarpo.llm.training import update as update_module
    from astarpo.llm.training.update import minibatch_order

    gen = torch.Generator().manual_seed(derive_seed(1, "minibatch", 3, 0))
    assert torch.equal(minibatch_order(1, 3, 0, 8), torch.randperm(8, generator=gen))
    orders = {tuple(minibatch_order(1, t, e, 8).tolist()) for t in (1, 2) for e in (0, 1)}
    assert len(orders) == 4  # every (step, update epoch) has its own shuffle
    calls = []

    def spy(seed, step, epoch, groups):
        calls.append((seed, step, epoch, groups))
        return minibatch_order(seed, step, epoch, groups)

    monkeypatch.setattr(update_module, "minibatch_order", spy)
    tr = make_trainer(tokenizer, tmp_path, max_steps=1, update_epochs=2)
    tr.step()
    assert calls == [(1, 1, 0, 8), (1, 1, 1, 8)]


def test_missing_prompt_is_a_clear_error(tokenizer, tmp_path):
    table = dict(TABLE)
    missing = ROWS[5]["prompt"]
    del table[missing]
    with pytest.raises(KeyError, match=missing.replace("+", r"\+")):
        lookup_v_star(table, [r["prompt"] for r in ROWS])
    with pytest.raises(KeyError, match="missing"):
        make_trainer(tokenizer, tmp_path, table=table)
    with pytest.raises(ValueError, match="V\\* table"):
        make_trainer(tokenizer, tmp_path, table=None)


def test_rollout_batch_select_keeps_rows_aligned():
    from astarpo.llm.rollout.base import Rollout

    r = Rollout(["a", "a", "b", "b"], [[3], [3], [4, 5], [4, 5]], [[6, 1], [7], [8], []],
                ["x", "y", "z", ""], [False, True, True, False], n=2)  # fmt: skip
    b = RolloutBatch.from_rollout(r, [1.0, 2.0, 3.0, 4.0], 0, v_star=[0.1, 0.1, 0.2, 0.2])
    assert b.group.tolist() == [0, 0, 1, 1]
    b.extra["advantage"] = b.rewards - b.v_star
    s = b.select(torch.tensor([2, 3]))
    assert s.prompts == ["b", "b"] and s.completions == ["z", ""]
    assert s.rewards.tolist() == [3.0, 4.0] and s.response_lengths.tolist() == [1, 0]
    torch.testing.assert_close(s.extra["advantage"], torch.tensor([2.8, 3.8]))
    every = b.select(torch.arange(4))  # all rows in order: the tensors are shared, not copied
    assert every.input_ids is b.input_ids and every.extra["advantage"] is b.extra["advantage"]
    every.extra["other"] = b.rewards
    assert "other" not in b.extra and every.prompts == b.prompts
    assert b.select(torch.tensor([1, 0, 2, 3])).rewards.tolist() == [2.0, 1.0, 3.0, 4.0]


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"batch_size": 10, "minibatches": 3}, "divisible"),
        ({"beta2": 0.0}, "beta2"),
        ({"learning_rate": -1.0}, "learning_rate"),
        ({"mixed_precision": "fp16"}, "mixed_precision"),
        ({"top_p": 0.0}, "top_p"),
        ({"max_steps": 0}, "max_steps"),
        ({"device": "tpu"}, "device"),
    ],
)
def test_config_validation(kw, msg):
    with pytest.raises(ValueError, match=msg):
        AStarPOConfig(**kw)


@pytest.mark.e2e
def test_train_cli_runs_resumes_and_names_missing_prompts(tmp_path, capsys):
    from astarpo.cli import main

    data = tmp_path / "p.jsonl"
    rows = addition_task(6, seed=0, zero_pad=True)
    data.write_text("".join(json.dumps({"problem": r["problem"], "answer": r["answer"]}) + "\n"
                            for r in rows))  # fmt: skip
    common = ["--model", "toy", "--data", str(data), "--template", "none", "--reward",
              "exact_match", "--max-new-tokens", "3", "--device", "cpu"]  # fmt: skip
    v = tmp_path / "v.jsonl"
    assert main(["value", *common, "--out", str(v), "--n-samples", "2", "--no-progress"]) == 0
    out = tmp_path / "run"
    train = ["train", *common, "--v-star", str(v), "--out", str(out), "--batch-size", "3",
             "--progress", "false", "--report-to", "none", "--save-steps", "1"]  # fmt: skip
    assert main([*train, "--max-steps", "2"]) == 0
    assert (out / "final" / "config.json").exists()
    assert main([*train, "--max-steps", "3", "--resume"]) == 0
    steps = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["step"] == 3
    # A V* table that lacks a training prompt: a clear error naming it.
    data2 = tmp_path / "p2.jsonl"
    extra = {"problem": "99+99=", "answer": "198"}
    data2.write_text(data.read_text() + json.dumps(extra) + "\n")
    capsys.readouterr()
    code = main(["train", *common[:2], "--data", str(data2), *common[4:], "--v-star", str(v),
                 "--out", str(tmp_path / "r2"), "--max-steps", "1",
                 "--allow-v-star-mismatch", "true"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and err[-1].startswith("error: prompt '99+99='"), err
    assert main([*train, "--beta2", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --beta2"), err


def test_update_gradient_is_loss_minus_entropy_bonus(tokenizer, tmp_path):
    coef = 0.5
    tr = make_trainer(tokenizer, tmp_path, minibatches=1, max_grad_norm=0.0, entropy_coef=coef)
    batches = record_batches(tr)
    start = copy.deepcopy(tr.model)
    captured = []
    tr.optimizer.step = lambda *a, **k: captured.append(  # type: ignore[method-assign]
        [p.grad.clone() for p in tr.model.parameters()]
    )
    tr.step()
    b = batches[-1]
    out = sequence_logprobs(start, b.packed, entropy=True)
    loss = advantage_regression_loss(out.logp, b.logp_ref, b.rewards, b.v_star, 1e-3, "mean")
    (loss - coef * out.entropy_mean()).backward()
    for g, p in zip(captured[0], start.parameters(), strict=True):
        torch.testing.assert_close(g, p.grad, atol=1e-7, rtol=1e-4)


class GroupAlgo:
    """A GRPO-shaped test algorithm: G = 2 samples, old log-probs, a trainable critic."""

    name = "group-test"
    samples_per_prompt = 2
    needs_reference = True
    needs_v_star = False
    needs_old_logprobs = True

    def __init__(self):
        self.critic = torch.nn.Linear(1, 1)
        self.seen_groups = []
        self.ratios = []

    def modules(self):
        return [self.critic]

    def prepare(self, batch):
        g = batch.rewards.view(-1, 2)
        batch.extra["advantage"] = (g - g.mean(1, keepdim=True)).flatten()
        return {"advantage/mean": float(batch.extra["advantage"].mean())}

    def loss(self, out, mb):
        self.seen_groups.append(mb.group.tolist())
        ratio = torch.exp(out.logp - mb.logp_old)
        self.ratios.append(float(ratio.detach().mean()))
        value = self.critic(torch.ones(len(mb), 1)).squeeze(-1)
        loss = -(ratio * mb.extra["advantage"]).mean() + ((value - mb.rewards) ** 2).mean()
        return loss, {"ratio/mean": float(ratio.detach().mean())}


def test_protocol_supports_groups_old_logprobs_and_critic(tokenizer, tmp_path):
    from astarpo.llm.algorithms.train_config import TrainConfig
    from astarpo.llm.training.trainer import Trainer

    algo = GroupAlgo()
    assert isinstance(algo, Algorithm)
    w0 = algo.critic.weight.detach().clone()
    tr = make_trainer(tokenizer, tmp_path, cls=TrainConfig, trainer=Trainer, algorithm=algo,
                      table=None, rewards=[first_digit_reward], max_steps=2, batch_size=4,
                      update_epochs=2, max_new_tokens=3, learning_rate=1e-2)  # fmt: skip
    batches = record_batches(tr)
    hist = tr.train()
    b = batches[-1]
    assert len(b) == 8 and b.group.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert b.prompts[0] == b.prompts[1] and b.logp_old is not None
    # Every minibatch holds whole groups: 2 prompts x 2 samples; 2 epochs x 2 minibatches.
    assert len(algo.seen_groups) == 2 * 2 * 2
    for groups in algo.seen_groups:
        assert len(groups) == 4 and groups[0] == groups[1] and groups[2] == groups[3]
    # The first minibatch of each step sees ratio 1 (old = current before any update).
    assert algo.ratios[0] == pytest.approx(1.0, abs=1e-5)
    assert algo.ratios[4] == pytest.approx(1.0, abs=1e-5)
    assert "ratio/mean" in hist[-1] and not torch.equal(w0, algo.critic.weight)
    state = torch.load(tmp_path / "checkpoint-2" / "trainer_state.pt", weights_only=False)
    torch.testing.assert_close(state["modules"][0]["weight"], algo.critic.weight)


def test_docs_list_every_config_field() -> None:
    """docs/llm.md's config tables name every field of AStarPOConfig and of the extensions'
    configs with its default ("required" for none)."""
    import dataclasses
    from pathlib import Path

    from astarpo.config import config_fields
    from astarpo.llm import RefreshConfig, StreamConfig

    page = (Path(__file__).parents[3] / "docs" / "llm.md").read_text()
    for cls in (AStarPOConfig, RefreshConfig, StreamConfig):
        for name, default, help_text in config_fields(cls):
            shown = "required" if default is dataclasses.MISSING else f"`{default!r}`"
            row = f"| `{name}` | {shown} |"
            assert row in page, f"docs/llm.md lacks the row of {cls.__name__}.{name}: {row}"
            assert help_text, f"config field {name} has no help text"


class StopAt:
    """A callback that stops training after step ``at`` and records what it saw."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.seen: list[int] = []
        self.evals = 0
        self.ended = False

    def on_step_end(self, record):
        self.seen.append(record["step"])
        return record["step"] >= self.at

    def on_evaluate(self, record):
        self.evals += 1

    def on_train_end(self, history):
        self.ended = True


def test_callback_stops_training_and_gets_every_hook(tokenizer, tmp_path):
    tr = make_trainer(tokenizer, tmp_path, max_steps=10)
    tr.eval_fn = lambda model: {"acc": 1.0}
    cb = StopAt(2)
    tr.callbacks = [cb]
    hist = tr.train()
    assert cb.seen == [1, 2] and tr.step_count == 2 and cb.ended
    assert cb.evals == 2  # before training and at the end
    assert (tmp_path / "checkpoint-2").exists()
    assert [r["step"] for r in hist if "loss" in r] == [1, 2]


def test_wall_clock_budget_and_time_schedule(tokenizer, tmp_path, monkeypatch):
    """Training time is a fake clock of 1 s per step: a 3.5 s budget stops after step 4,
    evaluations every 2 s of training time come after steps 2 and 4, and the evaluation
    time is not counted."""
    tr = make_trainer(
        tokenizer, tmp_path, max_steps=50, max_train_seconds=3.5, eval_every_seconds=2.0
    )
    real_step = tr.step

    def step_of_one_second():
        rec = real_step()
        tr.train_time = float(rec["step"])  # 1 s of training per step
        rec["time/train_total"] = tr.train_time
        return rec

    tr.step = step_of_one_second
    tr.eval_fn = lambda model: {"acc": 0.0}
    hist = tr.train()
    assert tr.step_count == 4
    eval_steps = [r["step"] for r in hist if "eval/acc" in r]
    assert eval_steps == [0, 2, 4]  # before, at 2 s, and the final one at 4 s
    assert all(r["time/train_total"] == r["step"] for r in hist if "eval/acc" in r)


def test_schedule_rules():
    from astarpo.llm.training.callbacks import Schedule

    s = Schedule(max_steps=10, eval_steps=3)
    assert [t for t in range(1, 10) if s.evaluate_now(t, float(t))] == [3, 6, 9]
    s = Schedule(max_steps=10, eval_every_seconds=2.0)
    assert [t for t in range(1, 8) if s.evaluate_now(t, float(t))] == [2, 4, 6]
    s = Schedule(max_steps=10, eval_every_seconds=2.0, train_time=3.0)  # resumed at 3 s
    assert [t for t in range(4, 8) if s.evaluate_now(t, float(t))] == [4, 6]
    assert Schedule(max_steps=3).done(3, 0.0) and not Schedule(max_steps=3).done(2, 1e9)
    assert Schedule(max_steps=99, max_train_seconds=1.0).done(1, 1.0)


@pytest.mark.parametrize("max_norm", [0.0, 1e-3, 1.0, 1e3])
def test_clipping_matches_clip_grad_norm_bitwise(max_norm):
    from astarpo.llm.training.update import _clip_grad_norm

    gen = torch.Generator().manual_seed(0)
    a = [torch.nn.Parameter(torch.zeros(s)) for s in [(3, 4), (5,), (2, 2, 2)]]
    b = [torch.nn.Parameter(torch.zeros(s)) for s in [(3, 4), (5,), (2, 2, 2)]]
    for x, y in zip(a, b, strict=True):
        x.grad = torch.randn(x.shape, generator=gen) * 0.1
        y.grad = x.grad.clone()
    norm = _clip_grad_norm(a, max_norm)
    ref = torch.nn.utils.clip_grad_norm_(b, max_norm if max_norm > 0 else float("inf"))
    assert norm == float(ref)
    assert all(torch.equal(x.grad, y.grad) for x, y in zip(a, b, strict=True))
