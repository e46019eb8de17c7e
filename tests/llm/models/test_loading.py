"""The one model loader: ``"toy"`` is a model name from Python as on the command line, built in
code without a hub request; the command line's loader is a thin caller of it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from astarpo.llm.models import loading
from astarpo.llm.models.loading import (
    TOY,
    is_toy,
    load_causal_lm,
    load_pretrained_model,
    load_tokenizer,
    named_tokenizer,
    resolve_model,
)
from astarpo.llm.models.toy import make_char_tokenizer, make_toy_model
from astarpo.llm.rewards.builtin import exact_match_reward
from astarpo.llm.toy.problems import addition_task

ROWS = addition_task(4, seed=0)


@pytest.fixture
def no_hub(monkeypatch):
    """Every from_pretrained fails: "toy" must never reach transformers' loaders (or the hub)."""
    transformers = pytest.importorskip("transformers")

    def refuse(*args, **kwargs):
        raise AssertionError(f"from_pretrained{args} was called")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", refuse)


def _same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_toy_is_the_embedded_model_built_in_code(no_hub):
    model, tok = load_causal_lm(TOY)
    want = make_toy_model(make_char_tokenizer(), seed=0)
    assert _same_weights(model, want) and model.config._name_or_path == "toy"
    assert tok.get_vocab() == make_char_tokenizer().get_vocab()
    assert load_tokenizer("toy").get_vocab() == tok.get_vocab()
    alone = load_pretrained_model("toy", dtype=torch.bfloat16)
    assert alone.dtype == torch.bfloat16 and alone.config._name_or_path == "toy"
    assert resolve_model("toy")[0].config._name_or_path == "toy"
    assert named_tokenizer(model).get_vocab() == tok.get_vocab()  # a toy object names its own
    assert is_toy("toy") and not is_toy(Path("toy")) and not is_toy("toy2")


def test_a_path_named_toy_is_a_directory_not_the_toy(tmp_path, monkeypatch, no_hub):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such directory"):
        load_causal_lm(Path("toy"))


def test_astarpo_trainer_takes_model_toy_from_python(tmp_path, no_hub):
    from toy_setup import quick_config

    from astarpo.llm.training.trainers import AStarPOTrainer

    start = time.perf_counter()
    trainer = AStarPOTrainer(
        model="toy",
        reward_funcs=[exact_match_reward],
        args=quick_config(tmp_path, max_steps=1, batch_size=2, max_new_tokens=2),
        train_dataset=ROWS,
        v_star_table={r["prompt"]: 0.0 for r in ROWS},
    )
    assert time.perf_counter() - start < 30  # was ~50 s of hub HEAD requests, then a failure
    assert trainer.model.config._name_or_path == "toy"
    assert trainer.tokenizer.get_vocab() == make_char_tokenizer().get_vocab()
    assert _same_weights(trainer.ref_model, make_toy_model(make_char_tokenizer(), seed=0))
    record = trainer.step()
    assert record["step"] == 1 and torch.isfinite(torch.tensor(record["loss"]))


def test_estimate_values_takes_model_toy_from_python(no_hub):
    from astarpo.llm.stage1.config import Stage1Config
    from astarpo.llm.stage1.estimate import estimate_values

    cfg = Stage1Config(n_samples=2, max_new_tokens=2, progress=False)
    table = estimate_values(model="toy", rows=ROWS, reward_funcs=exact_match_reward, config=cfg)
    assert len(table) == len(ROWS)
    assert {row.provenance["model"] for row in table.rows.values()} == {"toy"}


def test_the_command_lines_loader_calls_the_librarys(monkeypatch, no_hub):
    from astarpo.commands import common

    calls = []
    library = loading.load_pretrained_model

    def spy(spec, dtype=None, device=None):
        calls.append((spec, dtype, device))
        return library(spec, dtype, device)

    monkeypatch.setattr(common, "load_pretrained_model", spy)
    model, tok = common.load_model("toy", "cpu")
    assert calls == [("toy", None, "cpu")]  # float32 as built: auto names no dtype for the toy
    assert model.dtype == torch.float32 and model.config._name_or_path == "toy"
    assert _same_weights(model, make_toy_model(make_char_tokenizer(), seed=0))
    assert common.load_tokenizer("toy").get_vocab() == tok.get_vocab()
    with pytest.raises(SystemExit, match="not a local model directory"):
        common.load_model("Qwen/Qwen2.5-1.5B", "cpu")  # the command line never downloads


def test_a_saved_toy_tokenizer_reads_back_as_written(tmp_path, no_hub):
    """``AutoTokenizer`` reads a saved character tokenizer beside a Qwen2 config as a
    ``Qwen2Tokenizer``, which drops the spaces of a worked solution; the loader must not."""
    tok = make_char_tokenizer()
    make_toy_model(tok, seed=0, hidden_size=32, num_hidden_layers=1).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    text = "0300+0005= 5+0=5 c0 ; 0+0=0"
    again = load_tokenizer(tmp_path)
    ids = again(text, add_special_tokens=False)["input_ids"]
    assert ids == tok(text, add_special_tokens=False)["input_ids"]
    assert (again.pad_token_id, again.eos_token_id, again.padding_side) == (
        tok.pad_token_id, tok.eos_token_id, tok.padding_side
    )  # fmt: skip
