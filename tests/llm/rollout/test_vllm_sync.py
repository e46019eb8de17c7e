"""vLLM backend, fake engine: the weight-sync path, the CPU defaults and the LoRA merge.

What the real engine does with these calls is tested in ``test_vllm_real.py``
(``make test-vllm``); here only what astarpo passes, without vLLM installed.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
import torch
from toy_setup import tiny_qwen

from astarpo.llm.parallel.state import hf_weights
from astarpo.llm.rollout import vllm_cpu
from astarpo.llm.rollout.vllm import VLLMGenerator
from astarpo.llm.rollout.vllm_cpu import CPU_KV_CACHE_BYTES


class Tok:
    eos_token_id = 1
    pad_token_id = 0


def fake_vllm(*, worker_has_reload: bool = True, init_error: str | None = None) -> Any:
    mod = types.ModuleType("vllm")
    calls: dict[str, Any] = {"rpc": [], "apply": 0, "reset": 0, "init": None}
    mod.calls = calls  # type: ignore[attr-defined]

    class Worker:
        pass

    worker = Worker()
    if worker_has_reload:
        worker.reload_weights = lambda **kw: None  # type: ignore[attr-defined]

    class LLM:
        def __init__(self, **kwargs: Any) -> None:
            calls["init"] = kwargs
            if init_error:
                raise ValueError(init_error)

        def collective_rpc(self, method: Any, timeout: Any = None, args=(), kwargs=None):
            if callable(method):
                return [method(worker)]
            calls["rpc"].append((method, kwargs))
            return [None]

        def apply_model(self, func: Any) -> list[Any]:
            calls["apply"] += 1
            return [func(types.SimpleNamespace(load_weights=lambda w: set()))]

        def reset_prefix_cache(self) -> bool:
            calls["reset"] += 1
            return True

    mod.LLM = LLM  # type: ignore[attr-defined]
    return mod


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)


def test_sync_uses_inplace_reload(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", mod)
    gen = VLLMGenerator("m", Tok())
    model = tiny_qwen(num_hidden_layers=1)
    gen.sync_weights(model)
    gen.sync_weights(model)
    assert mod.calls["apply"] == 0 and mod.calls["reset"] == 2
    method, kwargs = mod.calls["rpc"][0]
    assert method == "reload_weights" and kwargs["is_checkpoint_format"] is True
    sent = dict(kwargs["weights_iterator"])
    assert sent.keys() == model.state_dict().keys()
    assert all(torch.equal(sent[k], v) for k, v in model.state_dict().items())


def test_sync_falls_back_without_reload(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = fake_vllm(worker_has_reload=False)
    monkeypatch.setitem(sys.modules, "vllm", mod)
    gen = VLLMGenerator("m", Tok())
    gen.sync_weights(tiny_qwen(num_hidden_layers=1))
    assert mod.calls["apply"] == 1 and mod.calls["rpc"] == [] and mod.calls["reset"] == 1


def test_cpu_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setattr(vllm_cpu, "on_cpu", lambda: True)
    monkeypatch.setattr(vllm_cpu, "model_max_len", lambda path: 1024)
    VLLMGenerator("m", Tok())
    init = mod.calls["init"]
    assert init["kv_cache_memory_bytes"] == CPU_KV_CACHE_BYTES
    assert init["enforce_eager"] is True and init["dtype"] == "float32"
    VLLMGenerator("m", Tok(), dtype="bfloat16", kv_cache_memory_bytes=5, enforce_eager=False)
    init = mod.calls["init"]
    assert init["kv_cache_memory_bytes"] == 5 and init["enforce_eager"] is False
    assert init["dtype"] == "bfloat16"
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "2")  # vLLM's own setting wins
    VLLMGenerator("m", Tok())
    assert "kv_cache_memory_bytes" not in mod.calls["init"]


def test_cpu_never_splits_a_seeded_prompt(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """vLLM 0.32's CPU build fails a seeded request whose prefill is chunked ("CPU Generator does
    not use offset"): chunked prefill is off there, with a token budget of a whole sequence (the
    model's max_position_embeddings, or the given max_model_len); either may be given."""
    mod = fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setattr(vllm_cpu, "on_cpu", lambda: True)
    tiny_qwen(max_position_embeddings=640).config.save_pretrained(tmp_path)
    VLLMGenerator(tmp_path, Tok())
    init = mod.calls["init"]
    assert init["enable_chunked_prefill"] is False and init["max_num_batched_tokens"] == 640
    VLLMGenerator(tmp_path, Tok(), max_model_len=300)
    assert mod.calls["init"]["max_num_batched_tokens"] == 300
    VLLMGenerator(tmp_path, Tok(), max_num_batched_tokens=4096)
    assert mod.calls["init"]["max_num_batched_tokens"] == 4096
    VLLMGenerator("m", Tok(), enable_chunked_prefill=True)  # no config read: vLLM's budget
    init = mod.calls["init"]
    assert init["enable_chunked_prefill"] is True and "max_num_batched_tokens" not in init
    monkeypatch.setattr(vllm_cpu, "on_cpu", lambda: False)
    VLLMGenerator("m", Tok())
    assert "enable_chunked_prefill" not in mod.calls["init"]


def test_gpu_gets_no_cpu_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setattr(vllm_cpu, "on_cpu", lambda: False)
    VLLMGenerator("m", Tok(), gpu_memory_utilization=0.4)
    init = mod.calls["init"]
    assert "kv_cache_memory_bytes" not in init and "enforce_eager" not in init
    assert init["dtype"] == "auto" and init["gpu_memory_utilization"] == 0.4


def test_cpu_memory_error_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    msg = "Available memory on node 0 (2.0/9.2 GiB) on startup is less than desired CPU memory"
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm(init_error=msg))
    monkeypatch.setattr(vllm_cpu, "on_cpu", lambda: True)
    monkeypatch.setattr(vllm_cpu, "model_max_len", lambda path: 1024)
    with pytest.raises(ValueError, match=r"kv_cache_memory_bytes=.*VLLM_CPU_KVCACHE_SPACE"):
        VLLMGenerator("m", Tok(), kv_cache_memory_bytes=1 << 40)


def test_lora_weights_are_the_merged_ones() -> None:
    """The tensors handed to vLLM are W + (alpha/r) B A, not views that the unmerge resets."""
    from peft import LoraConfig, get_peft_model

    base = tiny_qwen(num_hidden_layers=1)
    w = base.model.layers[0].self_attn.q_proj.weight.detach().clone()
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"], init_lora_weights=False)
    peft_model = get_peft_model(base, cfg)
    layer = peft_model.base_model.model.model.layers[0].self_attn.q_proj
    delta = (8 / 4) * layer.lora_B["default"].weight @ layer.lora_A["default"].weight
    sent = dict(hf_weights(peft_model))
    q = sent["model.layers.0.self_attn.q_proj.weight"]
    torch.testing.assert_close(q, w + delta)
    assert delta.abs().max() > 1e-3  # the check is not vacuous
    torch.testing.assert_close(layer.base_layer.weight, w)  # the policy is unmerged again
