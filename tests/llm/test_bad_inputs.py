"""Bad inputs a new user gives to the newer surfaces (the command line, the trainer, Stage 1,
evaluation): each is refused with an error that names the cause and the fix, before any long
work, and nothing is silently dropped or overwritten."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from fakes import FakeGenerator
from toy_setup import make_tiny_model, quick_config, toy_trainer

from astarpo.cli import main
from astarpo.llm.data.prompts import load_prompts
from astarpo.llm.data.rows import as_rows
from astarpo.llm.eval import evaluate
from astarpo.llm.models.toy import make_toy_model
from astarpo.llm.rewards.builtin import exact_match_reward
from astarpo.llm.rewards.scoring import compute_rewards
from astarpo.llm.rollout.base import SamplingConfig
from astarpo.llm.stage1.config import Stage1Config
from astarpo.llm.stage1.estimate import estimate_values
from astarpo.llm.stage1.rows import ValueTableError
from astarpo.llm.stage1.table import ValueTable, lookup_v_star
from astarpo.llm.toy.problems import addition_task
from astarpo.llm.training.callbacks import check_callbacks

ROWS = addition_task(8, seed=0)
SAMPLING = SamplingConfig(4, 1.0, 1.0)


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    """The one stderr line of a failed command."""
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert len(lines) == 1, lines
    return lines[0]


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The error line of a command the argument parser refuses (exit code 2)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    return _error(capsys)


def _data(tmp_path: Path, rows: list[dict] | None = None) -> Path:
    path = tmp_path / "add.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (rows or ROWS)))
    return path


# ----------------------------------------------------------------------------------- SILENT


def test_save_model_onto_an_existing_file_raises(tokenizer, tmp_path):
    tr = toy_trainer(tokenizer, tmp_path / "run")
    target = tmp_path / "afile"
    target.write_text("mine\n")
    with pytest.raises(FileExistsError, match="is a file, not a folder"):
        tr.save_model(target)
    assert target.read_text() == "mine\n"


def test_save_model_keeps_a_users_folder_unless_told_to_overwrite(tokenizer, tmp_path):
    tr = toy_trainer(tokenizer, tmp_path / "run")
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "config.json").write_text('{"mine": true}\n')
    with pytest.raises(FileExistsError, match=r"did not write.*overwrite=True"):
        tr.save_model(folder)
    assert json.loads((folder / "config.json").read_text()) == {"mine": True}
    tr.save_model(folder, overwrite=True)
    assert "mine" not in json.loads((folder / "config.json").read_text())
    ours = tmp_path / "ours"
    tr.save_model(ours)
    tr.save_model(ours)  # a folder it wrote is replaced without ceremony
    assert (ours / "astarpo_model.json").is_file() and (ours / "config.json").is_file()


def test_negative_limit_is_refused_by_value_eval_and_load_prompts(tmp_path, capsys):
    data = _data(tmp_path)
    out = tmp_path / "v.jsonl"
    value = ["value", "--model", "toy", "--data", str(data), "--out", str(out)]
    assert "--limit: must be >= 1, got -1" in _usage_error([*value, "--limit", "-1"], capsys)
    bench = ["eval", "--model", "toy", "--benchmarks", "math500"]
    assert "--limit: must be >= 1, got -1" in _usage_error([*bench, "--limit", "-1"], capsys)
    for bad in (-1, 0):
        with pytest.raises(ValueError, match="limit must be a whole number >= 1"):
            load_prompts(data, limit=bad)
    assert len(load_prompts(data, limit=3)) == 3
    assert not out.exists()


def test_duplicate_prompts_with_conflicting_answers_are_refused(tokenizer, tmp_path):
    rows = [dict(r) for r in ROWS]
    clash = {**rows[1], "answer": "999"}
    same = re.escape(f"have the same prompt {rows[1]['prompt']!r}")
    with pytest.raises(ValueError, match=r"rows\[1\] and rows\[8\] " + same):
        estimate_values(
            FakeGenerator({}),
            [*rows, clash],
            exact_match_reward,
            Stage1Config(n_samples=2, max_new_tokens=4),
        )
    with pytest.raises(ValueError, match=r"train_dataset\[1\] and train_dataset\[8\] " + same):
        toy_trainer(tokenizer, tmp_path / "run", rows=[*rows, clash])
    # identical duplicates stay as they were: computed once
    gen = FakeGenerator({r["prompt"]: r["answer"] for r in rows})
    table = estimate_values(
        gen, [*rows, dict(rows[1])], exact_match_reward, Stage1Config(n_samples=2, max_new_tokens=4)
    )
    assert len(table) == len(rows)


def test_eval_avg_zero_is_refused(capsys):
    from astarpo.commands.eval import parse_avg

    for spec in ("0", "amc23=0", "amc23=4,aime24=0"):
        with pytest.raises(SystemExit, match="give k >= 1"):
            parse_avg(spec)
    assert parse_avg("1") == (1, {})
    assert main(["eval", "--model", "toy", "--benchmarks", "math500", "--avg", "0"]) == 2
    assert "--avg '0': k is 0" in _error(capsys)


class _StepCounter:
    def __init__(self) -> None:
        self.steps = 0

    def on_step_end(self, record):
        self.steps += 1


def test_callbacks_that_would_never_be_called_are_refused():
    def plain(record):
        return None

    class NoArg:
        def on_step_end(self):
            return None

    with pytest.raises(TypeError, match=r"callbacks\[0\] \(function\) is a function without"):
        check_callbacks([plain])
    with pytest.raises(TypeError, match=r"callbacks\[1\] \(object\) is an object without"):
        check_callbacks([_StepCounter(), object()])
    with pytest.raises(TypeError, match=r"on_step_end must be callable with one argument"):
        check_callbacks([NoArg()])
    ok = _StepCounter()
    assert check_callbacks([ok]) == [ok] and check_callbacks(ok) == [ok]


def test_transformers_trainer_callbacks_are_refused_with_the_astarpo_form(tokenizer, tmp_path):
    transformers = pytest.importorskip("transformers")
    with pytest.raises(TypeError, match=r"TrainerCallback.*on_step_end"):
        toy_trainer(tokenizer, tmp_path / "run", callbacks=[transformers.PrinterCallback()])
    counter = _StepCounter()
    toy_trainer(tokenizer, tmp_path / "run", callbacks=[counter], max_steps=1).train()
    assert counter.steps == 1


def test_number_strings_are_not_numbers(tmp_path):
    def as_text(completions, **_):
        return ["1" for _ in completions]

    with pytest.raises(ValueError, match=r"reward 'as_text' returned '1' \(str\).*not text"):
        compute_rewards([as_text], ["p"], ["c"], {})
    with pytest.raises(ValueError, match=r"holds '0.5' \(str\).*not '0.5'"):
        lookup_v_star({"p": "0.5"}, ["p"])
    assert lookup_v_star({"p": 0.5}, ["p"]).tolist() == [0.5]
    table = estimate_values(
        FakeGenerator({"1+1=": "2"}),
        [{"prompt": "1+1=", "answer": "2"}],
        exact_match_reward,
        Stage1Config(n_samples=2, max_new_tokens=4),
        out_path=tmp_path / "v.jsonl",
    )
    row = json.loads((tmp_path / "v.jsonl").read_text())
    row["v_star"] = str(row["v_star"])
    (tmp_path / "bad.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueTableError, match=r"non-numeric.*the string '0\.0'"):
        ValueTable.load(tmp_path / "bad.jsonl")
    assert len(table) == 1


# ---------------------------------------------------------------------------------- UNCLEAR


def test_reward_returning_none_or_a_scalar_names_the_reward():
    def nothing(completions, **_):
        return None

    def scalar(completions, **_):
        return 1.0

    for fn, what in ((nothing, "None"), (scalar, "1.0")):
        with pytest.raises(ValueError, match=f"reward '{fn.__name__}' returned {what} .*list of 2"):
            compute_rewards([fn], ["p", "q"], ["c", "d"], {})


def test_merge_with_another_template_names_the_template(tmp_path, capsys):
    data = _data(tmp_path)
    rows = load_prompts(data, template="none")
    out = tmp_path / "v.jsonl"
    gen = FakeGenerator({r["prompt"]: r["answer"] for r in rows})
    for i in range(2):
        estimate_values(
            gen,
            rows,
            exact_match_reward,
            Stage1Config(n_samples=2, max_new_tokens=4),
            out_path=out,
            shard=(i, 2),
            provenance={"template": "none"},
        )
    assert main(["value", "--out", str(out), "--merge", "2", "--data", str(data)]) == 2
    err = _error(capsys)
    assert "made with --template 'none'" in err and "pass --template 'none'" in err, err
    assert not out.exists()
    cmd = ["value", "--out", str(out), "--merge", "2", "--data", str(data), "--template", "none"]
    assert main(cmd) == 0
    assert len(ValueTable.load(out)) == len(rows)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a torch without CUDA")
def test_device_cuda_without_cuda_says_no_cuda(tmp_path, capsys):
    data = _data(tmp_path)
    cmd = ["value", "--model", "toy", "--data", str(data), "--out", str(tmp_path / "v.jsonl")]
    assert main([*cmd, "--template", "none", "--device", "cuda"]) == 2
    assert "--device cuda: no CUDA" in _error(capsys)


def test_malformed_hub_specs_are_refused_before_any_download():
    from astarpo.llm.data.hub import parse_hf_spec, read_hf_dataset

    for spec in ("hf:", "hf::train", "hf:name:", "hf:a:b:c:d", "hf: "):
        with pytest.raises(ValueError, match="is not a hub dataset spec; write hf:NAME"):
            read_hf_dataset(spec)
    assert parse_hf_spec("hf:org/x") == ("org/x", None, "train")
    assert parse_hf_spec("hf:org/x:test") == ("org/x", None, "test")
    assert parse_hf_spec("hf:org/x:main:test") == ("org/x", "main", "test")


def test_hub_dataset_fails_fast_without_network(monkeypatch):
    pytest.importorskip("datasets")
    import datasets
    from huggingface_hub import constants

    import astarpo.llm.data.hub as hub

    def no_download(*args, **kwargs):
        raise AssertionError("load_dataset must not be called")

    monkeypatch.setattr(datasets, "load_dataset", no_download)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "hub_reachable", lambda endpoint: False)
    with pytest.raises(ValueError, match=r"does not answer.*HF_HUB_OFFLINE=1"):
        hub.read_hf_dataset("hf:nosuch")

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'nosuch' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ValueError, match="not in the local cache, and HF_HUB_OFFLINE is set"):
        hub.read_hf_dataset("hf:nosuch")


def test_hub_probe_answers_false_for_an_unreachable_address():
    from astarpo.llm.data.hub import hub_reachable

    assert hub_reachable("http://127.0.0.1:9", timeout=2.0) is False  # the discard port: closed


def test_eval_out_to_an_unwritable_path_fails_before_evaluating(tmp_path, capsys, monkeypatch):
    import astarpo.commands.eval as eval_command

    def no_model(*args, **kwargs):
        raise AssertionError("the model must not be loaded")

    monkeypatch.setattr(eval_command, "load_model", no_model)
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    data = _data(tmp_path)
    for out in (blocker / "r.json", tmp_path):
        assert main(["eval", "--model", "toy", "--data", str(data), "--out", str(out)]) == 2
        assert f"--out {out}" in _error(capsys)


def test_model_folder_without_tokenizer_names_the_tokenizer(tokenizer, tmp_path, capsys):
    from astarpo.llm.models.loading import load_causal_lm, load_tokenizer

    folder = tmp_path / "notok"
    make_tiny_model(tokenizer).save_pretrained(folder)
    with pytest.raises(FileNotFoundError, match="has no tokenizer"):
        load_tokenizer(folder)
    model, tok = load_causal_lm(folder)  # a caller with its own tokenizer still loads it
    assert tok is None and model is not None
    data = _data(tmp_path)
    assert main(["eval", "--model", str(folder), "--data", str(data), "--template", "none"]) == 1
    assert "has no tokenizer" in _error(capsys)


def test_data_folder_that_is_not_a_dataset_says_so(tmp_path):
    folder = tmp_path / "notds"
    folder.mkdir()
    _data(folder)
    with pytest.raises(ValueError, match=r"is a folder but not a dataset saved.*add.jsonl"):
        load_prompts(folder)


def test_a_dict_or_a_path_as_rows_is_refused(tokenizer, tmp_path):
    data = _data(tmp_path)
    for bad in (str(data), data, {"prompt": ["1+1="], "answer": ["2"]}):
        with pytest.raises(ValueError, match=r"train_dataset is (the path|one mapping)"):
            as_rows(bad)
    with pytest.raises(ValueError, match=r"rows is one mapping.*Dataset.from_dict"):
        estimate_values(
            FakeGenerator({}),
            {"prompt": ["1+1="]},
            exact_match_reward,
            Stage1Config(n_samples=2, max_new_tokens=4),
        )
    with pytest.raises(ValueError, match="train_dataset is the path"):
        toy_trainer(tokenizer, tmp_path / "run", rows=str(data))


def test_eval_fn_returning_a_float_is_named(tokenizer, tmp_path):
    tr = toy_trainer(tokenizer, tmp_path / "run", eval_fn=lambda model: 0.5)
    with pytest.raises(TypeError, match=r"eval_fn returned 0.5 \(float\).*\{'accuracy': 0.5\}"):
        tr.train()
    tr = toy_trainer(tokenizer, tmp_path / "b", eval_fn=lambda model: {"accuracy": "0.5"})
    with pytest.raises(TypeError, match="values must be numbers"):
        tr.train()


def test_rows_without_the_rewards_column_are_refused_before_generating(tokenizer, tmp_path):
    rows = [{"prompt": r["prompt"]} for r in ROWS]
    gen = FakeGenerator({})
    with pytest.raises(ValueError, match=r"rows\[0\] has no 'answer'.*exact_match_reward"):
        evaluate(gen, rows, [exact_match_reward], progress=False)
    with pytest.raises(ValueError, match=r"rows\[0\] has no 'answer'"):
        estimate_values(gen, rows, exact_match_reward, Stage1Config(n_samples=2, max_new_tokens=4))
    assert gen.calls == []
    with pytest.raises(ValueError, match=r"train_dataset\[0\] has no 'answer'"):
        toy_trainer(tokenizer, tmp_path / "run", rows=rows)


def test_estimate_values_out_path_folder_is_refused(tmp_path):
    with pytest.raises(ValueError, match="is a folder; give the table's file name"):
        estimate_values(
            FakeGenerator({}),
            ROWS,
            exact_match_reward,
            Stage1Config(n_samples=2, max_new_tokens=4),
            out_path=tmp_path,
        )


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a torch without CUDA")
def test_trainer_device_cuda_without_cuda_says_no_cuda(tmp_path, tokenizer):
    from astarpo.llm import AStarPOTrainer
    from astarpo.llm.rewards.builtin import exact_match_reward
    from astarpo.llm.toy.problems import addition_task

    rows = addition_task(4, seed=0)
    args = quick_config(tmp_path / "r", device="cuda", max_new_tokens=3, batch_size=2)
    with pytest.raises(ValueError, match="device 'cuda': no CUDA: this torch is a CPU-only build"):
        AStarPOTrainer(
            make_toy_model(tokenizer, seed=0),
            reward_funcs=exact_match_reward,
            args=args,
            train_dataset=rows,
            v_star_table={r["prompt"]: 0.5 for r in rows},
            processing_class=tokenizer,
        )


def test_estimate_values_refuses_what_the_model_cannot_fit_before_sampling(tokenizer, monkeypatch):
    """From Python as from the command line: a token budget past the model's positions, or a
    prompt too long for them, is refused at once, for a generator as for ``model=``."""
    from astarpo.llm.rollout.hf import HFGenerator

    def no_sampling(*args, **kwargs):
        raise AssertionError("sampled before checking the model's positions")

    monkeypatch.setattr(HFGenerator, "generate", no_sampling)
    model = make_toy_model(tokenizer, seed=0)
    huge = Stage1Config(n_samples=2, max_new_tokens=10**6)
    room = r"max_new_tokens \(1000000\) leaves no room for a prompt in the model's 64 positions"
    with pytest.raises(ValueError, match=room):
        estimate_values(HFGenerator(model, tokenizer), ROWS, exact_match_reward, huge)
    with pytest.raises(ValueError, match=room):
        estimate_values(model=model, tokenizer=tokenizer, rows=ROWS, config=huge,
                        reward_funcs=exact_match_reward)  # fmt: skip
    long = [*ROWS, {"prompt": "1+" * 100, "answer": "1"}]
    with pytest.raises(ValueError, match=r"^add.jsonl: 1 of 9 prompts do not fit the model"):
        estimate_values(HFGenerator(model, tokenizer), long, exact_match_reward,
                        Stage1Config(n_samples=2, max_new_tokens=4),
                        provenance={"data": "add.jsonl"})  # fmt: skip


def test_a_truncated_weights_file_is_named_not_an_internal_error(tokenizer, tmp_path, capsys):
    from astarpo.llm.models.loading import load_pretrained_model

    folder = tmp_path / "m"
    make_tiny_model(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    weights = folder / "model.safetensors"
    size = weights.stat().st_size
    for cut in (0, 5000, size // 2):  # "header too small", "invalid header length", "incomplete"
        with weights.open("r+b") as f:
            f.truncate(cut)
        with pytest.raises(OSError, match=r"a weights file \(model.safetensors\) is corrupt or "):
            load_pretrained_model(folder)
    data = _data(tmp_path)
    assert main(["eval", "--model", str(folder), "--data", str(data), "--template", "none"]) == 1
    err = _error(capsys)
    assert f"model '{folder}'" in err and "save_pretrained" in err and "internal" not in err, err


def test_a_corrupt_tokenizer_file_is_named(tokenizer, tmp_path):
    from astarpo.llm.models.loading import load_tokenizer

    folder = tmp_path / "m"
    tokenizer.save_pretrained(folder)
    (folder / "tokenizer.json").write_text('{"trunc')
    with pytest.raises(OSError, match=rf"the tokenizer in '{folder}' cannot be read .*tokenizer"):
        load_tokenizer(folder)
