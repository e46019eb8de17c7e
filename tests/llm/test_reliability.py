"""Reliability: nothing lost, nothing silent, nothing executed, nothing hangs.

Each test names the behaviour it checks; the sections group them by failure (non-finite steps,
one run per directory, resume, weights-only loading, V* tables, the reward deadline, long
prompts, a full disk, torn lines, the Stage 1 lock). CLI error paths run ``astarpo`` in a
subprocess and check the exit code and the one ``error:`` line on stderr.
"""

from __future__ import annotations

import copy
import io
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from fakes import FakeGenerator
from filelock import FileLock
from toy_setup import addition_rows, first_digit_reward, make_tiny_model, toy_trainer

from astarpo.llm.algorithms.grpo import GRPOConfig
from astarpo.llm.data.prompts import load_prompts
from astarpo.llm.rewards.builtin import exact_match_reward
from astarpo.llm.rewards.scoring import RewardTimeoutError, compute_rewards
from astarpo.llm.rollout.base import SamplingConfig
from astarpo.llm.stage1.config import Stage1Config
from astarpo.llm.stage1.estimate import estimate_values
from astarpo.llm.stage1.rows import ValueTableError
from astarpo.llm.stage1.table import ValueTable, lookup_v_star
from astarpo.llm.toy.problems import addition_task
from astarpo.llm.training import checkpoint as checkpoint_module
from astarpo.llm.training.checkpoint import CheckpointError
from astarpo.llm.training.guards import NonFiniteError
from astarpo.llm.training.metrics import read_metrics
from astarpo.llm.training.run_dir import RunDirError
from astarpo.llm.training.trainer import Trainer

ROOT = Path(__file__).parents[2]
ROWS = addition_rows()  # toy_trainer's rows and V* table
TABLE = {r["prompt"]: 0.1 for r in ROWS}


def cli(*args, tmp_path=None, timeout=300, extra_path=None):
    """Run ``astarpo ARGS`` in a subprocess; returns (code, stdout, stderr lines)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), extra_path, env.get("PYTHONPATH")) if p
    )
    out = subprocess.run(
        [sys.executable, "-m", "astarpo", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=tmp_path,
    )
    return out.returncode, out.stdout, [x for x in out.stderr.splitlines() if x.strip()]


def error_lines(err):
    return [x for x in err if x.startswith("error:")]


def assert_one_error(code, err, want_code, text):
    errors = error_lines(err)
    assert code == want_code, (code, err)
    assert len(errors) == 1, err
    assert text in errors[0], errors[0]
    assert not any("Traceback" in x for x in err), err


def write_data(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def data_file(tmp_path):
    rows = [{"problem": r["problem"], "answer": r["answer"]} for r in addition_task(4, seed=0)]
    return write_data(tmp_path / "p.jsonl", rows)


def toy_flags(data):
    return ["--model", "toy", "--data", str(data), "--template", "none", "--device", "cpu",
            "--max-new-tokens", "3"]  # fmt: skip


def train_flags(data, table, out):
    return ["train", *toy_flags(data), "--reward", "exact_match", "--v-star", str(table),
            "--out", str(out), "--batch-size", "2", "--progress", "false",
            "--report-to", "none", "--save-steps", "1"]  # fmt: skip


@pytest.fixture
def value_table(tmp_path, data_file):
    out = tmp_path / "v.jsonl"
    args = ["--reward", "exact_match", "--out", str(out), "--n-samples", "2", "--no-progress"]
    code, _, err = cli("value", *toy_flags(data_file), *args, tmp_path=tmp_path)
    assert code == 0, err
    return out


# ---------------------------------------------------------------- non-finite steps
@pytest.mark.parametrize(
    ("scale", "what"),
    [(1e300, "rewards are not finite as float32"), (1e30, "loss is inf")],
)
def test_huge_reward_stops_with_the_step_and_saves_nothing(tokenizer, tmp_path, scale, what):
    def reward(prompts, completions, **_):
        return [scale] * len(completions)

    tr = toy_trainer(tokenizer, tmp_path / "run", rewards=[reward])
    before = copy.deepcopy(tr.model.state_dict())
    with pytest.raises(NonFiniteError, match=rf"step 1: {what}.*reward scale.*learning rate"):
        tr.train()
    for k, v in tr.model.state_dict().items():
        assert torch.equal(v, before[k]), k  # the update was never applied
    assert not list((tmp_path / "run").glob("checkpoint-*"))
    assert [r["step"] for r in read_metrics(tmp_path / "run" / "metrics.jsonl")] == []


def test_non_finite_v_star_mapping_refused_at_construction(tokenizer, tmp_path):
    bad = dict(TABLE)
    bad[ROWS[3]["prompt"]] = float("nan")
    with pytest.raises(ValueError, match="non-finite values"):
        lookup_v_star(bad, [r["prompt"] for r in ROWS])
    with pytest.raises(ValueError, match="non-finite"):
        toy_trainer(tokenizer, tmp_path, table={**TABLE, ROWS[0]["prompt"]: float("inf")})


def train_with_reward(tmp_path, data_file, value_table, reward, source, *flags, **kw):
    """``astarpo train`` into ``tmp_path/run`` with the custom ``reward`` ("module:function")
    instead of exact_match, its module's ``source`` written to ``tmp_path``; ``flags``: more
    flags, ``kw``: of ``cli``."""
    (tmp_path / f"{reward.split(':')[0]}.py").write_text(source)
    args = train_flags(data_file, value_table, tmp_path / "run")
    args[args.index("exact_match")] = reward
    return cli(*args, *flags, "--allow-v-star-mismatch", "true",
               tmp_path=tmp_path, extra_path=str(tmp_path), **kw)  # fmt: skip


@pytest.mark.e2e
def test_cli_exits_1_without_final(tmp_path, data_file, value_table):
    source = "def huge(prompts, completions, **_):\n    return [1e300] * len(completions)\n"
    code, out, err = train_with_reward(tmp_path, data_file, value_table, "bad_rewards:huge",
                                       source, "--max-steps", "2")  # fmt: skip
    assert_one_error(code, err, 1, "step 1: rewards are not finite")
    assert not (tmp_path / "run" / "final").exists() and out == ""


# ------------------------------------------------------------ one run per directory
@pytest.mark.e2e
def test_cli_refuses_non_empty_out_without_resume_or_overwrite(tmp_path, data_file, value_table):
    out = tmp_path / "run"
    base = train_flags(data_file, value_table, out)
    assert cli(*base, "--max-steps", "2", tmp_path=tmp_path)[0] == 0
    metrics = (out / "metrics.jsonl").read_text()
    code, _, err = cli(*base, "--max-steps", "1", tmp_path=tmp_path)
    assert_one_error(code, err, 1, "holds an earlier run (checkpoint-1, checkpoint-2, final")
    assert (out / "metrics.jsonl").read_text() == metrics  # nothing truncated
    assert (out / "checkpoint-2").is_dir()
    code, _, err = cli(*base, "--max-steps", "1", "--overwrite", tmp_path=tmp_path)
    assert code == 0, err
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [1]
    assert not (out / "checkpoint-2").exists()  # the earlier run is gone, not mixed


def test_trainer_refuses_non_empty_output_dir(tokenizer, tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 13}\n')
    with pytest.raises(
        RunDirError, match=r"holds an earlier run \(metrics.jsonl\).*--resume.*--overwrite"
    ):
        toy_trainer(tokenizer, tmp_path).train()
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 13}\n'


# ------------------------------------------------------ resume with other settings
@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"learning_rate": 2e-3}, "learning_rate: 0.001 -> 0.002"),
        ({"batch_size": 2}, "batch_size: 4 -> 2"),
        ({"seed": 2}, "seed: 1 -> 2"),
        ({"beta2": 0.01}, "beta2: 0.001 -> 0.01"),
        ({"rows": ROWS[:6]}, "data:"),
        ({"rewards": [exact_match_reward]}, "rewards:"),
    ],
)
def test_resume_refuses_changes_that_break_equality(tokenizer, tmp_path, change, named):
    toy_trainer(tokenizer, tmp_path).train()
    kw = dict(change)
    rows = kw.pop("rows", ROWS)
    rewards = kw.pop("rewards", [first_digit_reward])
    tr = toy_trainer(tokenizer, tmp_path, rewards=rewards, rows=rows, max_steps=3, **kw)
    with pytest.raises(RunDirError, match="cannot resume") as e:
        tr.train(resume=True)
    assert named in str(e.value)


def test_resume_refuses_another_algorithm_and_allows_max_steps(tokenizer, tmp_path):
    toy_trainer(tokenizer, tmp_path).train()
    grpo = toy_trainer(tokenizer, tmp_path, cls=GRPOConfig, trainer=Trainer, max_steps=3)
    with pytest.raises(RunDirError, match="algorithm: 'astarpo' -> 'grpo'"):
        grpo.train(resume=True)
    tr = toy_trainer(tokenizer, tmp_path, max_steps=3, eval_steps=1, save_total_limit=5)
    tr.train(resume=True)
    assert tr.step_count == 3


@pytest.mark.e2e
def test_cli_resume_names_the_changed_flag(tmp_path, data_file, value_table):
    base = train_flags(data_file, value_table, tmp_path / "run")
    assert cli(*base, "--max-steps", "1", tmp_path=tmp_path)[0] == 0
    code, _, err = cli(*base, "--max-steps", "2", "--resume", "--learning-rate", "0.5",
                       tmp_path=tmp_path)  # fmt: skip
    assert_one_error(code, err, 1, "learning_rate: 1e-06 -> 0.5")


# ------------------------------------------------------------ weights-only loading
class Payload:
    """Unpickling this calls ``open(marker, "w")``: code run by a crafted checkpoint."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_crafted_trainer_state_is_refused_and_runs_nothing(tokenizer, tmp_path):
    toy_trainer(tokenizer, tmp_path / "run").train()
    marker = tmp_path / "pwned"
    ckpt = tmp_path / "run" / "checkpoint-2"
    state = {"step": 2, "modules": [], "rng": Payload(str(marker))}
    torch.save(state, ckpt / "trainer_state.pt")
    tr = toy_trainer(tokenizer, tmp_path / "run", max_steps=3)
    with pytest.raises(CheckpointError, match="refused to load"):
        tr.resume(ckpt)
    assert not marker.exists()


def test_checkpoints_load_with_weights_only(tokenizer, tmp_path):
    toy_trainer(tokenizer, tmp_path).train()
    for name in ("trainer_state.pt", "model.pt"):
        torch.load(tmp_path / "checkpoint-2" / name, weights_only=True)  # raises if not plain


# ------------------------------------------------------------------ V* tables
def _table_file(tmp_path, rows, reward=exact_match_reward, name="v.jsonl", **kw):
    gen = FakeGenerator({r["prompt"]: r["answer"] for r in rows}, **kw)
    config = Stage1Config(n_samples=2, beta1=0.5, max_new_tokens=3, prompts_per_call=2,
                          progress=False)  # fmt: skip
    return estimate_values(gen, rows, [reward], config, out_path=tmp_path / name)


def test_edited_v_star_and_duplicated_prompt_are_errors(tmp_path):
    table = _table_file(tmp_path, ROWS)
    lines = Path(table.path).read_text().splitlines()
    row = json.loads(lines[1])
    row["v_star"] = 1e6
    bad = tmp_path / "edited.jsonl"
    bad.write_text("\n".join([lines[0], json.dumps(row), *lines[2:]]) + "\n")
    with pytest.raises(ValueTableError, match=r"edited.jsonl:2: v_star 1000000.0 lies outside"):
        ValueTable.load(bad)
    dup = tmp_path / "dup.jsonl"
    dup.write_text("\n".join([*lines, lines[0]]) + "\n")
    with pytest.raises(ValueTableError, match=rf"dup.jsonl:{len(lines) + 1}: .*already in line 1"):
        ValueTable.load(dup)


def test_table_of_another_reward_or_answers_is_refused_by_training(tokenizer, tmp_path):
    table = ValueTable.load(_table_file(tmp_path, ROWS).path)
    prov = next(iter(table)).provenance
    assert prov["reward_path"] == ["astarpo.llm.rewards.builtin:exact_match_reward"]
    assert {"beta1", "n_samples", "model", "sampling", "data"} <= set(prov)
    with pytest.raises(ValueTableError, match="reward_path: table"):
        toy_trainer(tokenizer, tmp_path / "a", rewards=[first_digit_reward], table=table)
    # A subset of the table's prompts fits (the all-wrong filter, a split); another answer not.
    toy_trainer(tokenizer, tmp_path / "b", rewards=[exact_match_reward], rows=ROWS[:4], table=table)
    other = [dict(ROWS[0], answer="999"), *ROWS[1:4]]
    with pytest.raises(ValueTableError, match="answer of prompt"):
        toy_trainer(
            tokenizer, tmp_path / "b2", rewards=[exact_match_reward], rows=other, table=table
        )
    # The explicit override accepts it; the right reward and data pass.
    toy_trainer(tokenizer, tmp_path / "c", table=table, allow_v_star_mismatch=True)
    toy_trainer(tokenizer, tmp_path / "d", rewards=[exact_match_reward], table=table)


@pytest.mark.e2e
def test_cli_refuses_a_table_of_another_model(tmp_path, data_file, value_table):
    lines = value_table.read_text().splitlines()
    rows = [json.loads(x) for x in lines]
    for r in rows:
        r["provenance"]["model"] = "/models/other"
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = cli(*train_flags(data_file, other, tmp_path / "run"), "--max-steps", "1",
                       tmp_path=tmp_path)  # fmt: skip
    assert_one_error(code, err, 1, "model: table '/models/other', training 'toy'")


def score_a(prompts, completions, answer, **_):
    return [1.0] * len(completions)


def score_b(prompts, completions, answer, **_):
    return [0.0] * len(completions)


score_a.__name__ = score_b.__name__ = "score"  # same name, different functions


def test_stage1_resume_with_another_reward_of_the_same_name_is_refused(tmp_path):
    with pytest.raises(RuntimeError, match="simulated kill"):
        _table_file(tmp_path, ROWS, reward=score_a, fail_after=1)
    assert len(ValueTable.load(tmp_path / "v.jsonl")) == 2  # one batch written
    with pytest.raises(ValueTableError, match="reward_path"):
        _table_file(tmp_path, ROWS, reward=score_b)


# ------------------------------------------------------------------- reward deadline
def hang(prompts, completions, **_):
    threading.Event().wait()  # never returns


def test_a_hanging_reward_stops_with_its_name(tokenizer, tmp_path):
    t0 = time.monotonic()
    with pytest.raises(RewardTimeoutError, match=r"test_reliability:hang did not return"):
        compute_rewards([hang], ["p"], ["c"], {}, timeout=0.5)
    tr = toy_trainer(tokenizer, tmp_path, rewards=[hang], reward_timeout=0.5)
    with pytest.raises(RewardTimeoutError, match="reward_timeout"):
        tr.train()
    assert time.monotonic() - t0 < 60


def test_deadline_thread_is_reused_and_replaced_after_a_hang():
    threads = []

    def who(prompts, completions, **_):
        threads.append(threading.current_thread())
        return [1.0] * len(completions)

    def fails(prompts, completions, **_):
        raise KeyError("inside the reward")

    for _ in range(2):
        assert compute_rewards([who], ["p"], ["c"], {}, timeout=5.0)[0].tolist() == [1.0]
    assert threads[0] is threads[1] is not threading.current_thread()
    with pytest.raises(KeyError, match="inside the reward"):  # raised in the caller
        compute_rewards([fails], ["p"], ["c"], {}, timeout=5.0)
    with pytest.raises(RewardTimeoutError):
        compute_rewards([hang], ["p"], ["c"], {}, timeout=0.2)
    assert compute_rewards([who], ["p"], ["c"], {}, timeout=5.0)[0].tolist() == [1.0]
    assert threads[2] is not threads[0]  # the hung worker is not handed the next call
    assert threads[2].is_alive() and threads[2].daemon


@pytest.mark.e2e
def test_cli_hang_exits_1_naming_the_function(tmp_path, data_file, value_table):
    source = "import threading\n\ndef stuck(prompts, completions, **_):\n"
    source += "    threading.Event().wait()\n"
    code, _, err = train_with_reward(tmp_path, data_file, value_table, "hang_rewards:stuck",
                                     source, "--reward-timeout", "1", timeout=240)  # fmt: skip
    assert_one_error(code, err, 1, "reward hang_rewards:stuck did not return within 1 s")


# ---------------------------------------------------------------- prompts too long
def test_prompts_longer_than_the_model_are_refused_before_generation(tokenizer, tmp_path):
    rows = [*ROWS, {"prompt": "1+" * 5000, "answer": "1"}]
    with pytest.raises(ValueError, match=r"1 of 9 prompts do not fit .* 64 positions \(row 8"):
        toy_trainer(tokenizer, tmp_path, rows=rows, table={r["prompt"]: 0.0 for r in rows})


@pytest.mark.e2e
def test_cli_value_refuses_a_long_prompt(tmp_path):
    data = write_data(tmp_path / "long.jsonl", [{"problem": "9" * 10_000, "answer": "1"}])
    args = ["--reward", "exact_match", "--out", str(tmp_path / "v.jsonl"), "--n-samples", "2"]
    code, _, err = cli("value", *toy_flags(data), *args, tmp_path=tmp_path)
    assert_one_error(code, err, 1, "1 of 1 prompts do not fit the model")


# ------------------------------------------------------------------- disk full
def test_disk_full_reports_the_path_and_leaves_no_debris(tokenizer, tmp_path, monkeypatch):
    tr = toy_trainer(tokenizer, tmp_path, max_steps=1)
    tr.train()
    real_save = torch.save

    def full_disk(obj, f, *a, **k):
        if str(f).endswith("trainer_state.pt"):
            raise RuntimeError(
                "[enforce fail at inline_container.cc] basic_ios::clear: iostream error"
            )
        return real_save(obj, f, *a, **k)

    monkeypatch.setattr(checkpoint_module.torch, "save", full_disk)
    tr.step_count = 7
    with pytest.raises(CheckpointError, match=f"no space left on device at {tmp_path}"):
        tr.save()
    assert sorted(p.name for p in tmp_path.iterdir() if "checkpoint" in p.name) == ["checkpoint-1"]


# -------------------------------------------------------- torn lines, corrupt ckpt
def test_torn_metrics_line_and_corrupt_latest_checkpoint(tokenizer, tmp_path, caplog):
    toy_trainer(tokenizer, tmp_path, max_steps=2, save_total_limit=0).train()
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write('{"step": 3, "lo')  # a kill during a write
    (tmp_path / "checkpoint-2" / "model.pt").write_bytes(b"not a checkpoint")
    tr = toy_trainer(tokenizer, tmp_path, max_steps=3, save_total_limit=0)
    with caplog.at_level(logging.WARNING):
        tr.train(resume=True)
    assert "falling back to checkpoint-1" in caplog.text
    assert "dropping a truncated last line" in caplog.text
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [1, 2, 3]


# ---------------------------------------------------- data errors at load
@pytest.mark.e2e
def test_non_utf8_byte_names_file_and_line(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_bytes(b'{"problem": "1+1=", "answer": "2"}\n{"problem": "caf\xe9", "answer": "1"}\n')
    with pytest.raises(ValueError, match=r"d.jsonl:2: not valid UTF-8 \(byte 0xe9 at column 17\)"):
        load_prompts(p)
    code, _, err = cli("value", *toy_flags(p), "--out", str(tmp_path / "v.jsonl"),
                       tmp_path=tmp_path)  # fmt: skip
    assert_one_error(code, err, 1, "d.jsonl:2: not valid UTF-8")


def test_empty_prompt_refused_at_load(tokenizer, tmp_path):
    p = write_data(tmp_path / "d.jsonl", [{"problem": "1+1=", "answer": "2"},
                                          {"problem": "  ", "answer": "3"}])  # fmt: skip
    with pytest.raises(ValueError, match=r"d.jsonl:2: the problem \('problem'\) is empty"):
        load_prompts(p, template="none")
    with pytest.raises(ValueError, match="row 1 has no non-empty 'prompt'"):
        toy_trainer(tokenizer, tmp_path, rows=[ROWS[0], {"prompt": "", "answer": "1"}])


def test_null_or_missing_answer_is_an_error_at_load(tmp_path):
    p = write_data(tmp_path / "d.jsonl", [{"problem": "1+1=", "answer": None}])
    with pytest.raises(ValueError, match=r"d.jsonl:1: the answer \('answer'\) is null"):
        load_prompts(p)
    p = write_data(tmp_path / "e.jsonl", [{"problem": "1+1=", "answer": "2"}, {"problem": "x"}])
    with pytest.raises(KeyError, match=r"e.jsonl:2: no answer column"):
        load_prompts(p)


# -------------------------------------------------------- trainer inputs
def test_same_object_as_model_and_reference(tokenizer, tmp_path):
    model = make_tiny_model(tokenizer)
    with pytest.raises(ValueError, match="ref_model is the same object as model"):
        toy_trainer(tokenizer, tmp_path, model=model, ref=model)


def bad_type(prompts, completions, **_):
    return ["abc"] * len(completions)


def test_non_number_reward_names_the_function():
    with pytest.raises(
        ValueError, match=r"reward 'bad_type' returned 'abc' \(str\) for completion 0"
    ):
        compute_rewards([bad_type], ["p", "q"], ["c", "d"], {})


# ------------------------------------------------------------ greedy N, lock
@pytest.mark.e2e
def test_value_refuses_greedy_with_several_samples(tmp_path, data_file):
    code, _, err = cli("value", *toy_flags(data_file), "--out", str(tmp_path / "v.jsonl"),
                       "--temperature", "0", "--n-samples", "4", tmp_path=tmp_path)  # fmt: skip
    assert_one_error(code, err, 2, "--temperature 0 (greedy) gives 4 identical samples")
    assert not (tmp_path / "v.jsonl").exists()


def test_two_stage1_writers_on_one_table_are_refused(tmp_path):
    out = tmp_path / "v.jsonl"
    out.touch()
    with FileLock(f"{out}.lock", timeout=0):  # another Stage 1 process holds the table
        with pytest.raises(ValueTableError, match="being written by another Stage 1 process"):
            _table_file(tmp_path, ROWS)
    assert out.read_bytes() == b""
    assert len(_table_file(tmp_path, ROWS)) == len(ROWS)  # the lock is released after a run


# ---------------------------------------------------------------- more checks
class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_progress_prints_a_line_every_30_s_off_a_terminal(tokenizer, tmp_path, monkeypatch):
    import tqdm.std

    clock = Clock()
    monkeypatch.setattr(tqdm.std, "time", clock)  # tqdm's clock
    stream = io.StringIO()  # not a terminal
    monkeypatch.setattr(sys, "stderr", stream)
    tr = toy_trainer(tokenizer, tmp_path, max_steps=4, save_steps=0, progress=True)
    step = tr.step

    def slow_step():  # each step takes 12 s on tqdm's clock
        clock.t += 12
        return step()

    monkeypatch.setattr(tr, "step", slow_step)
    tr.train()
    lines = [x for x in stream.getvalue().splitlines() if x.startswith("train:")]
    # at 0 s, at 36 s (12 and 24 s are within 30 s of the last line; 48 s too), and at the end
    assert [x.split("|")[2].split()[0] for x in lines] == ["0/4", "3/4", "4/4"], lines
    assert "loss=" in lines[1]


@pytest.mark.e2e
def test_cli_train_shows_progress_and_resuming_message(tmp_path, data_file, value_table):
    base = train_flags(data_file, value_table, tmp_path / "run")
    base[base.index("--progress") + 1] = "true"
    code, _, err = cli(*base, "--max-steps", "1", tmp_path=tmp_path)
    assert code == 0 and any(x.startswith("train: 100%") and "| 1/1 " in x for x in err), err
    code, _, err = cli(*base, "--max-steps", "2", "--resume", tmp_path=tmp_path)
    assert code == 0 and any("resuming" in x and "(1 of 2 steps done)" in x for x in err), err


def test_save_total_limit_keeps_the_newest(tokenizer, tmp_path):
    toy_trainer(tokenizer, tmp_path, max_steps=4).train()
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-3", "checkpoint-4"]


def test_run_config_and_metrics_are_standard_json(tokenizer, tmp_path):
    tr = toy_trainer(tokenizer, tmp_path, max_steps=1)
    tr.train()

    def strict(text):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard {c}"))

    saved = strict((tmp_path / "run_config.json").read_text())
    assert saved["config"]["learning_rate"] == 1e-3 and saved["algorithm"] == "astarpo"
    for line in (tmp_path / "metrics.jsonl").read_text().splitlines():
        strict(line)
    assert np.isfinite(read_metrics(tmp_path / "metrics.jsonl")[-1]["loss"])


@pytest.mark.e2e
def test_cli_debug_shows_the_traceback(tmp_path):
    code, _, err = cli("--debug", "value", "--out", str(tmp_path / "v.jsonl"), "--merge", "2",
                       tmp_path=tmp_path)  # fmt: skip
    assert code == 1 and any("Traceback" in x for x in err)


@pytest.mark.e2e
def test_cli_usage_errors_are_one_line_with_exit_2(tmp_path, data_file):
    code, _, err = cli("train", "--model", "toy", tmp_path=tmp_path)
    assert_one_error(code, err, 2, "the following arguments are required: --out")
    assert len(err) == 1  # no usage block
    code, _, err = cli("train", "--out", "r", "--batch-size", "x", tmp_path=tmp_path)
    assert_one_error(code, err, 2, "--batch-size: invalid int value: 'x'")


@pytest.mark.e2e
def test_cli_results_are_not_overwritten_without_overwrite(tmp_path, data_file):
    official = write_data(tmp_path / "off.jsonl", [{"prompt": "1+1=", "eval_0": 1, "eval_1": 0}])
    out = tmp_path / "v.jsonl"
    out.write_text("keep me\n")
    code, _, err = cli("value", "--out", str(out), "--import-official", str(official),
                       tmp_path=tmp_path)  # fmt: skip
    assert_one_error(code, err, 2, "exists; pass --overwrite")
    assert out.read_text() == "keep me\n"
    assert cli("value", "--out", str(out), "--import-official", str(official), "--overwrite",
               tmp_path=tmp_path)[0] == 0  # fmt: skip
    res = tmp_path / "res.json"
    res.write_text("{}")
    code, _, err = cli("eval", *toy_flags(data_file), "--out", str(res), tmp_path=tmp_path)
    assert_one_error(code, err, 2, f"--out {res} exists")


def test_stage1_resume_says_how_many_prompts_are_done(tmp_path, capsys):
    with pytest.raises(RuntimeError, match="simulated kill"):
        _table_file(tmp_path, ROWS, fail_after=2)
    capsys.readouterr()
    assert len(_table_file(tmp_path, ROWS)) == len(ROWS)
    assert "resuming, 4 prompts already done" in capsys.readouterr().err


def test_evaluation_has_the_reward_deadline_too():
    from astarpo.llm.eval import evaluate

    gen = FakeGenerator({r["prompt"]: r["answer"] for r in ROWS})
    with pytest.raises(RewardTimeoutError, match="test_reliability:hang"):
        evaluate(gen, ROWS, [hang], sampling=SamplingConfig(3, 0.0, 1.0), progress=False,
                 reward_timeout=0.5)  # fmt: skip
