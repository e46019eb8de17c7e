"""The one way to choose a generator: ``build_generator(backend, ...)``.

``astarpo value``, ``train`` and ``eval`` (flags ``--backend`` and
``--gpu-memory-utilization``) and the trainer's default all call :func:`build_generator`.
:func:`reference_sampler` is what Stage 1 samples from: a generator, or a reference model
(object, local directory or hub id) wrapped in the HF backend, with the rows rendered and
checked against it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from astarpo.llm.data.rows import as_rows
from astarpo.llm.models.fit import check_sampling_fits
from astarpo.llm.models.loading import is_model_name, named_tokenizer, resolve_model
from astarpo.llm.rollout import vllm as vllm_backend
from astarpo.llm.rollout.base import Generator
from astarpo.llm.rollout.hf import HFGenerator

__all__ = ["BACKENDS", "build_generator", "named_generator", "reference_sampler", "resolve_backend"]

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


def named_generator(generator: Any, batch_size: int = 64) -> Any:
    """``generator`` as is, or, for a model name (``"toy"``, a local directory, a hub id, a GGUF
    checkpoint such as ``"smollm2"``), an :class:`~astarpo.llm.rollout.hf.HFGenerator` of the
    model and tokenizer :func:`~astarpo.llm.models.loading.resolve_model` loads.

    Raises:
        ValueError: a named local directory holds no tokenizer to sample with.
    """
    if not is_model_name(generator):
        return generator
    model, tokenizer = resolve_model(generator)
    if tokenizer is None:
        raise ValueError(
            f"model {generator!r} has no tokenizer to sample with; save one beside it with "
            "tokenizer.save_pretrained(DIR), or pass a generator."
        )
    model.eval()
    return HFGenerator(model, tokenizer, batch_size)


def reference_sampler(
    generator: Any,
    model: Any,
    tokenizer: Any,
    rows: Iterable[Mapping[str, Any]],
    sampling: Any,
    where: str = "rows",
) -> tuple[Any, list[dict[str, Any]], dict[str, Any]]:
    """``(generator, rows, provenance)``: the generator (built from ``model`` when given), the
    rows (conversations rendered, checked against the model) and the model's name.

    The rows are checked against the model sampled from before any sampling
    (:func:`~astarpo.llm.models.fit.check_sampling_fits`: characters its tokenizer cannot
    encode, prompts + ``sampling.max_new_tokens`` past its positions): ``model``, or the model
    and tokenizer a generator holds (:class:`~astarpo.llm.rollout.hf.HFGenerator`; a vLLM
    engine checks its own length limit).

    Args:
        generator: A generator, or None with ``model``.
        model: The reference (object, ``"toy"``, local directory or hub id), or None with
            ``generator``.
        tokenizer: The model's tokenizer (None: loaded with it, or the generator's).
        rows: The dataset rows.
        sampling: The :class:`~astarpo.llm.rollout.base.SamplingConfig` of Stage 1.
        where: The data's name in the errors (a file name).

    Raises:
        ValueError: unless exactly one of ``generator`` and ``model`` is given, when a model
            object comes without a tokenizer, or when the rows do not fit the model.
    """
    if (generator is None) == (model is None):
        raise ValueError("give exactly one of generator=... or model=... (the reference).")
    if generator is not None:
        table_rows = as_rows(rows, tokenizer, "rows")
        sampled, sampled_tokenizer = (getattr(generator, a, None) for a in ("model", "tokenizer"))
        if sampled is not None and sampled_tokenizer is not None:
            check_sampling_fits(
                table_rows, sampled_tokenizer, sampled, sampling.max_new_tokens, where
            )
        return generator, table_rows, {}
    name = str(model) if is_model_name(model) else ""
    model, loaded = resolve_model(model)
    tokenizer = tokenizer if tokenizer is not None else loaded
    if tokenizer is None:
        tokenizer = named_tokenizer(model)
        if tokenizer is None:
            raise ValueError("estimate_values(model=<object>) needs tokenizer=... as well.")
    table_rows = as_rows(rows, tokenizer, "rows")
    check_sampling_fits(table_rows, tokenizer, model, sampling.max_new_tokens, where)
    model.eval()
    gen = build_generator("hf", model, tokenizer)
    return gen, table_rows, ({"model": name} if name else {})
