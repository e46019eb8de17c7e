"""The one way to choose a generator: ``build_generator(backend, ...)``.

``astarpo value``, ``train`` and ``eval`` (flags ``--backend`` and
``--gpu-memory-utilization``) and the trainer's default all call :func:`build_generator`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from astarpo.llm.rollout import vllm as vllm_backend
from astarpo.llm.rollout.base import Generator
from astarpo.llm.rollout.hf import HFGenerator

__all__ = ["BACKENDS", "build_generator", "resolve_backend"]

BACKENDS: tuple[str, ...] = ("auto", "hf", "vllm")
"""Accepted ``backend`` values."""


def resolve_backend(backend: str) -> str:
    """``"auto"`` -> ``"vllm"`` when vLLM is installed and a GPU is visible, else ``"hf"``.

    Raises:
        ValueError: ``backend`` is not one of :data:`BACKENDS`.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}.")
    if backend == "auto":
        return "vllm" if vllm_backend.vllm_available() else "hf"
    return backend


def build_generator(
    backend: str,
    model: Any,
    tokenizer: Any,
    *,
    model_path: str | Path | None = None,
    batch_size: int = 64,
    gpu_memory_utilization: float = 0.3,
    seed: int = 0,
    workdir: str | Path = "vllm_init",
    **vllm_kwargs: Any,
) -> Generator:
    """A generator sampling from ``model``.

    Args:
        backend: ``"hf"`` (:class:`~astarpo.llm.rollout.hf.HFGenerator`, weights shared with
            ``model``), ``"vllm"`` (:class:`~astarpo.llm.rollout.vllm.VLLMGenerator` started
            from ``model`` saved under ``workdir``, synced before every step) or ``"auto"``
            (:func:`resolve_backend`).
        model: The policy (plain, DDP, FSDP2 or peft); may be ``None`` for ``"vllm"`` with
            ``model_path`` (Stage 1 from a saved model: the weights are loaded by vLLM only).
        tokenizer: Its tokenizer.
        model_path: A saved model directory the vLLM engine starts from (instead of saving
            ``model`` to ``workdir``).
        batch_size: Rows per ``generate`` call of the HF backend.
        gpu_memory_utilization: Share of device memory the vLLM engine may take.
        seed: The vLLM engine's seed.
        workdir: Where the vLLM backend saves the model it starts from.
        **vllm_kwargs: Other ``vllm.LLM`` arguments (e.g. ``dtype``, ``max_model_len``).

    Returns:
        The generator.

    Raises:
        ValueError: no ``model`` for the HF backend, or neither ``model`` nor ``model_path``.
    """
    if resolve_backend(backend) == "vllm":
        if model_path is not None:
            return vllm_backend.VLLMGenerator(
                model_path,
                tokenizer,
                gpu_memory_utilization=gpu_memory_utilization,
                seed=seed,
                **vllm_kwargs,
            )
        if model is None:
            raise ValueError("the vLLM backend needs a model or a model_path.")
        return vllm_backend.VLLMGenerator.from_model(
            model,
            tokenizer,
            workdir,
            gpu_memory_utilization=gpu_memory_utilization,
            seed=seed,
            **vllm_kwargs,
        )
    if model is None:
        raise ValueError("the HF backend needs the model itself (model=None given).")
    return HFGenerator(model, tokenizer, batch_size)
