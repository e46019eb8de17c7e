"""vLLM backend against a fake ``vllm`` module: the parameters passed and the rollout built."""

from __future__ import annotations

import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from fake_vllm import EOS, FakeTokenizer, make_fake_vllm
from toy_setup import tiny_qwen

from astarpo.llm.parallel.state import hf_weights
from astarpo.llm.rollout import vllm as vllm_backend
from astarpo.llm.rollout.backend import build_generator
from astarpo.llm.rollout.base import Generator, SamplingConfig, prompt_seeds
from astarpo.llm.rollout.vllm import VLLMGenerator, to_vllm_sampling_kwargs


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    mod = make_fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    return mod


# ----------------------------------------------------------------------------- sampling kwargs


def test_sampling_kwargs_sampled() -> None:
    kw = to_vllm_sampling_kwargs(SamplingConfig(64, 0.7, 0.9), n=4, seed=11, eos_token_id=7)
    assert kw == {
        "n": 4,
        "temperature": 0.7,
        "top_p": 0.9,
        "max_tokens": 64,
        "seed": 11,
        "ignore_eos": False,
        "detokenize": False,
        "stop_token_ids": [7],
    }
    assert "top_k" not in kw  # vLLM's default top_k is "off", as top_k=0 in HF


def test_sampling_kwargs_greedy_and_no_eos() -> None:
    kw = to_vllm_sampling_kwargs(SamplingConfig(8, 0.0, 0.5), n=1, seed=None, eos_token_id=None)
    assert kw["temperature"] == 0.0 and kw["top_p"] == 1.0 and kw["max_tokens"] == 8
    assert "stop_token_ids" not in kw and kw["seed"] is None
    with pytest.raises(ValueError, match="n must be"):
        to_vllm_sampling_kwargs(SamplingConfig(), n=0, seed=0, eos_token_id=1)


def test_prompt_seeds_depend_on_global_index_only() -> None:
    full = prompt_seeds(5, range(8))
    assert prompt_seeds(5, [4, 5, 6, 7]) == full[4:]  # rank 1's half of a global batch
    assert len(set(full)) == 8 and all(0 <= s < 2**31 for s in full)
    assert prompt_seeds(6, range(8)) != full


# ----------------------------------------------------------------------------- generator


def test_missing_vllm_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError
    with pytest.raises(ImportError, match=r"astarpo\[vllm\]"):
        VLLMGenerator("m", FakeTokenizer())
    assert not vllm_backend.vllm_available()


def test_vllm_available_needs_module_and_cuda(
    fake_vllm: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.machinery

    fake_vllm.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert vllm_backend.vllm_available()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert not vllm_backend.vllm_available()


def test_engine_arguments(fake_vllm: types.ModuleType) -> None:
    gen = VLLMGenerator("/models/x", FakeTokenizer(), gpu_memory_utilization=0.45, dtype="bfloat16")
    init = fake_vllm.calls["llm_init"]
    assert init["model"] == "/models/x" and init["gpu_memory_utilization"] == 0.45
    assert init["dtype"] == "bfloat16" and init["tensor_parallel_size"] == 1
    assert isinstance(gen, Generator)
    import os

    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        VLLMGenerator("m", FakeTokenizer(), gpu_memory_utilization=1.5)
    assert "distributed_executor_backend" not in init


def test_engine_under_torchrun_uses_external_launcher(
    fake_vllm: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    VLLMGenerator("m", FakeTokenizer())
    assert fake_vllm.calls["llm_init"]["distributed_executor_backend"] == "external_launcher"


def test_generate_builds_prompt_major_rollout(fake_vllm: types.ModuleType) -> None:
    gen = VLLMGenerator("m", FakeTokenizer())
    sampling = SamplingConfig(max_new_tokens=3, temperature=1.0, top_p=0.95)
    rollout = gen.generate(["123", "78"], n=3, sampling=sampling, seed=2)
    requests, params = fake_vllm.calls["generate"][-1]
    assert requests == [{"prompt_token_ids": [4, 5, 6]}, {"prompt_token_ids": [10, 11]}]
    seeds = prompt_seeds(2, [0, 1])
    assert [p.kwargs["seed"] for p in params] == seeds
    assert all(p.kwargs["stop_token_ids"] == [EOS] and p.kwargs["n"] == 3 for p in params)
    assert len(rollout) == 6 and rollout.n == 3
    assert rollout.prompts == ["123"] * 3 + ["78"] * 3
    assert rollout.prompt_ids[3] == [10, 11]
    # Samples with 1 and 2 body tokens end in EOS; the third hits max_new_tokens=3.
    assert rollout.truncated == [False, False, True] * 2
    assert rollout.response_ids[0][-1] == EOS and EOS not in rollout.response_ids[2]
    assert len(rollout.response_ids[2]) == 3
    assert rollout.completions[1] == FakeTokenizer().decode(
        rollout.response_ids[1][:-1], skip_special_tokens=True
    )
    # Global indices: the same prompt gets the same seed on any rank.
    gen.generate(["78"], n=3, sampling=sampling, seed=2, prompt_indices=[1])
    assert fake_vllm.calls["generate"][-1][1][0].kwargs["seed"] == seeds[1]
    with pytest.raises(ValueError, match="prompt_indices"):
        gen.generate(["78"], n=1, sampling=sampling, seed=2, prompt_indices=[0, 1])


@pytest.mark.parametrize("with_apply_model", [True, False])
def test_sync_weights_loads_hf_names(
    monkeypatch: pytest.MonkeyPatch, with_apply_model: bool
) -> None:
    mod = make_fake_vllm(with_apply_model=with_apply_model)
    monkeypatch.setitem(sys.modules, "vllm", mod)
    gen = VLLMGenerator("m", FakeTokenizer())
    model = tiny_qwen()
    gen.sync_weights(model)
    loaded = dict(gen.llm.model.loaded)
    expected = model.state_dict()
    assert loaded.keys() == expected.keys()
    for name, value in expected.items():
        assert torch.equal(loaded[name], value)
    assert mod.calls["reset"] == 1


def test_hf_weights_merges_lora() -> None:
    from peft import LoraConfig, get_peft_model

    base = tiny_qwen()
    base_state = {k: v.clone() for k, v in base.state_dict().items()}
    config = LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False
    )
    peft_model = get_peft_model(base, config)
    ids = torch.tensor([[3, 4, 5, 6]])
    before = peft_model(ids).logits
    merged = dict(hf_weights(peft_model))
    assert merged.keys() == base_state.keys()
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(merged[q], base_state[q])  # adapters folded in
    k = "model.layers.0.self_attn.k_proj.weight"
    assert torch.equal(merged[k], base_state[k])  # untouched layer
    # The model is unmerged afterwards: same outputs as before, base weights restored.
    torch.testing.assert_close(peft_model(ids).logits, before)
    with peft_model.disable_adapter():
        plain = tiny_qwen()
        torch.testing.assert_close(peft_model(ids).logits, plain(ids).logits)


def test_from_model_saves_then_starts(fake_vllm: types.ModuleType, tmp_path: Path) -> None:
    class Saver:
        def save_pretrained(self, path: Path) -> None:
            (Path(path) / "saved").write_text("x")

    tok = FakeTokenizer()
    tok.save_pretrained = lambda path: (Path(path) / "tok").write_text("t")  # type: ignore[attr-defined]
    VLLMGenerator.from_model(Saver(), tok, tmp_path / "w", gpu_memory_utilization=0.2)  # type: ignore[arg-type]
    assert (tmp_path / "w" / "saved").exists() and (tmp_path / "w" / "tok").exists()
    assert fake_vllm.calls["llm_init"]["model"] == str(tmp_path / "w")


def test_auto_backend_picks_vllm_only_when_available(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from astarpo.llm.algorithms.astarpo import AStarPOConfig
    from astarpo.llm.rollout.hf import HFGenerator

    args = AStarPOConfig(output_dir=str(tmp_path))
    assert args.backend == "auto"
    monkeypatch.setattr(vllm_backend, "vllm_available", lambda: False)
    kw = {"gpu_memory_utilization": args.gpu_memory_utilization}
    gen = build_generator(args.backend, torch.nn.Linear(1, 1), FakeTokenizer(), **kw)
    assert isinstance(gen, HFGenerator)
    started: list[Any] = []
    monkeypatch.setattr(vllm_backend, "vllm_available", lambda: True)
    monkeypatch.setattr(
        VLLMGenerator, "from_model", classmethod(lambda cls, *a, **k: started.append(k) or "vllm")
    )
    assert build_generator(args.backend, torch.nn.Linear(1, 1), FakeTokenizer(), **kw) == "vllm"
    assert started and started[0]["gpu_memory_utilization"] == args.gpu_memory_utilization


# ----------------------------------------------------------------------------- parity with HF


@pytest.mark.parametrize(
    "sampling", [SamplingConfig(5, 0.8, 0.9), SamplingConfig(3, 1.0, 1.0), SamplingConfig(4, 0.0)]
)
def test_parameters_match_the_hf_backend(sampling: SamplingConfig) -> None:
    """The HF backend's GenerationConfig and the vLLM SamplingParams say the same thing."""
    from astarpo.llm.models.toy import make_char_tokenizer, make_toy_model
    from astarpo.llm.rollout.hf import HFGenerator

    tok = make_char_tokenizer()
    model = make_toy_model(tok, seed=0, hidden_size=32, intermediate_size=64, num_hidden_layers=1)
    model.generation_config.eos_token_id = [tok.eos_token_id, 7]  # an extra stop token
    seen: dict[str, Any] = {}

    def fake_generate(input_ids: torch.Tensor, attention_mask: torch.Tensor, generation_config):
        seen["cfg"], seen["rows"] = generation_config, input_ids.shape[0]
        return torch.cat([input_ids, torch.full((input_ids.shape[0], 1), 1)], dim=1)

    model.generate = fake_generate
    HFGenerator(model, tok).generate(["1+2="], n=3, sampling=sampling, seed=0)
    cfg = seen["cfg"]
    with tempfile.TemporaryDirectory() as tmp:
        mod = make_fake_vllm()
        sys.modules["vllm"] = mod
        try:
            gen = VLLMGenerator.from_model(model, tok, tmp)
            gen.generate(["1+2="], n=3, sampling=sampling, seed=0)
        finally:
            del sys.modules["vllm"]
    kw = mod.calls["generate"][-1][1][0].kwargs
    assert seen["rows"] == kw["n"] == 3  # n samples per prompt
    assert cfg.max_new_tokens == kw["max_tokens"] == sampling.max_new_tokens
    assert cfg.do_sample == (kw["temperature"] > 0) == (not sampling.greedy)
    if not sampling.greedy:
        assert cfg.temperature == kw["temperature"] and cfg.top_p == kw["top_p"]
        assert cfg.top_k == 0 and "top_k" not in kw  # no top-k truncation in either
    assert sorted(cfg.eos_token_id) == kw["stop_token_ids"] == [tok.eos_token_id, 7]
    assert kw["ignore_eos"] is False


def test_stage1_cli_with_vllm_backend(
    fake_vllm: types.ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from astarpo.cli import main
    from astarpo.llm.models.toy import make_char_tokenizer, make_toy_model

    tok = make_char_tokenizer()
    model_dir = tmp_path / "model"
    make_toy_model(tok, hidden_size=32, intermediate_size=64, num_hidden_layers=1).save_pretrained(
        model_dir
    )
    tok.save_pretrained(model_dir)
    data = tmp_path / "p.jsonl"
    data.write_text(
        "".join(json.dumps({"problem": f"{i}+1=", "answer": "9"}) + "\n" for i in range(3))
    )
    out = tmp_path / "v.jsonl"
    args = ["value", "--model", str(model_dir), "--data", str(data), "--out", str(out)]
    args += ["--template", "none", "--reward", "exact_match", "--n-samples", "2"]
    args += ["--backend", "vllm", "--gpu-memory-utilization", "0.5", "--no-progress"]
    assert main(args) == 0
    assert fake_vllm.calls["llm_init"]["gpu_memory_utilization"] == 0.5
    assert fake_vllm.calls["llm_init"]["model"] == str(model_dir)
    assert "3 prompts" in capsys.readouterr().out
