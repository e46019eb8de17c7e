"""vLLM generation backend, colocated with training, with the interface of the HF backend.

:class:`VLLMGenerator` implements :class:`astarpo.llm.rollout.base.Generator`: Stage 1 and the
Stage 2 trainer sample through it exactly as through ``HFGenerator``. The engine lives in the
training process on the same GPU (``gpu_memory_utilization`` caps the share of GPU memory vLLM
takes for weights and KV cache; the rest is left to training), and
:meth:`VLLMGenerator.sync_weights` copies the policy's current weights into it after each update.

Sampling parity with the HF backend (:func:`to_vllm_sampling_kwargs`), HF's argument then
vLLM's: ``do_sample=True, temperature=t`` / ``temperature=t``; greedy ``do_sample=False`` /
``temperature=0, top_p=1``; ``top_p`` / ``top_p``; no top-k: ``top_k=0`` / the default
(disabled); ``max_new_tokens`` / ``max_tokens``; EOS ``eos_token_id`` / ``stop_token_ids`` with
``ignore_eos=False``; ``num_return_sequences=n`` / ``n``; one sampling generator seed / one
``seed`` per prompt (:func:`~astarpo.llm.rollout.base.prompt_seeds`). In both an EOS, when
generated, is the last token of ``response_ids``; ``completions`` are decoded with
``skip_special_tokens=True``; ``truncated`` means ``max_new_tokens`` was hit without EOS.

Weight sync (:meth:`VLLMGenerator.sync_weights`): the policy's tensors, with Hugging Face
names, go to ``llm.collective_rpc("reload_weights", kwargs={"weights_iterator": ...,
"is_checkpoint_format": True})``, then the prefix cache is reset. ``reload_weights`` (vLLM's GPU
worker, which the CPU worker subclasses) re-runs the post-loading weight processing that the
model's ``load_weights`` through ``LLM.apply_model`` skips (on vLLM 0.32 that fails with
``'Parameter' object has no attribute 'weight_loader'``); older workers fall back to it. Only
``reload_weights`` ran against a real engine (vLLM 0.32.0, CPU build; docs/scaling.md). The
engine is in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` unless set), so tensors are handed
over by reference; one engine per training rank, no tensor parallelism inside vLLM.

On vLLM's CPU build the engine's defaults are those of :func:`~astarpo.llm.rollout.vllm_cpu.
cpu_engine_kwargs` (the KV cache sized explicitly, float32, eager, no chunked prefill). Imports
without vLLM; a :class:`VLLMGenerator` without it raises an ImportError naming the extra.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from astarpo.llm.parallel.dist import dist_info_from_env, unwrap_model
from astarpo.llm.parallel.state import hf_weights
from astarpo.llm.rollout import vllm_cpu
from astarpo.llm.rollout.base import Rollout, SamplingConfig, eos_token_ids, prompt_seeds

__all__ = [
    "VLLMGenerator",
    "to_vllm_sampling_kwargs",
    "vllm_available",
]

_INSTALL_HINT = (
    "the vLLM backend needs the `vllm` package: pip install 'astarpo[vllm]' on a machine with "
    "an NVIDIA GPU (on CPU, vLLM's CPU build: `make test-vllm` shows the install steps), or "
    "use the Hugging Face backend (--backend hf)."
)


def vllm_available() -> bool:
    """True when ``vllm`` is installed and a CUDA device is visible (what the backend needs)."""
    try:
        found = importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):  # a broken or stubbed-out entry in sys.modules
        found = False
    return found and torch.cuda.is_available()


def _import_vllm() -> Any:
    try:
        return importlib.import_module("vllm")
    except ImportError as err:
        raise ImportError(_INSTALL_HINT) from err


def _has_reload_weights(worker: Any) -> bool:
    """Run in each vLLM worker: does it have the in-place ``reload_weights``?"""
    return callable(getattr(worker, "reload_weights", None))


def to_vllm_sampling_kwargs(
    sampling: SamplingConfig, n: int, seed: int | None, eos_token_id: int | Sequence[int] | None
) -> dict[str, Any]:
    """The ``vllm.SamplingParams`` keyword arguments equivalent to the HF backend's sampling.

    Args:
        sampling: Temperature, top-p and token budget.
        n: Samples per prompt (``>= 1``).
        seed: Seed of this request (``None``: unseeded).
        eos_token_id: Token(s) that end a response (as the HF backend: the tokenizer's EOS and
            the model's ``generation_config.eos_token_id``), or ``None`` to rely on vLLM's
            defaults.

    Returns:
        Keyword arguments for ``vllm.SamplingParams``.

    Raises:
        ValueError: ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}.")
    kwargs: dict[str, Any] = {
        "n": n,
        "temperature": 0.0 if sampling.greedy else float(sampling.temperature),
        "top_p": 1.0 if sampling.greedy else float(sampling.top_p),
        "max_tokens": int(sampling.max_new_tokens),
        "seed": seed,
        "ignore_eos": False,
        "detokenize": False,
    }
    if eos_token_id is not None:
        ids = [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id)
        kwargs["stop_token_ids"] = sorted({int(i) for i in ids})
    return kwargs


class VLLMGenerator:
    """Sample with a vLLM engine colocated with training (same process, same GPU).

    Args:
        model_path: A Hugging Face model directory (or hub name already in the local cache)
            that vLLM loads at start; later weights come from :meth:`sync_weights`.
        tokenizer: The tokenizer used everywhere else (prompts are encoded and responses
            decoded with it, so text and ids agree with the HF backend).
        gpu_memory_utilization: Share of the GPU's memory vLLM may take for weights and KV
            cache, in (0, 1]. Default 0.3, leaving the rest to training. On the CPU build the
            KV cache is sized by ``kv_cache_memory_bytes`` instead
            (:mod:`~astarpo.llm.rollout.vllm_cpu`).
        dtype: Weight dtype in vLLM (``"auto"``, ``"float32"``, ``"bfloat16"``...). Default
            ``"auto"`` (vLLM's choice on GPU; float32 on CPU).
        seed: Engine seed. Default 0.
        max_model_len: Longest prompt + response in tokens (``None``: the model's).
        enable_prefix_caching: Reuse KV of shared prompt prefixes. Default True (the cache
            is reset after every weight sync).
        add_special_tokens: Passed to the tokenizer when encoding prompts. Default False (as
            the HF backend).
        eos_token_ids: Tokens that end a response (default: the tokenizer's EOS; ``from_model``
            adds the model's ``generation_config.eos_token_id``, as the HF backend does).
        return_logprobs: Also return, in ``rollout.extra["logprobs"]``, the log-probability
            vLLM computed for each sampled response (sum over its tokens, from the raw logits,
            i.e. at temperature 1). Default False.
        **llm_kwargs: Any other ``vllm.LLM`` argument (e.g. ``kv_cache_memory_bytes``). Under
            ``torchrun`` ``distributed_executor_backend="external_launcher"`` is the default.

    Raises:
        ImportError: vLLM is not installed (the message names the ``vllm`` extra).
        ValueError: ``gpu_memory_utilization`` is outside (0, 1], or (CPU build) the engine
            could not reserve its memory (the message names the setting to change).
    """

    def __init__(
        self,
        model_path: str | Path,
        tokenizer: Any,
        *,
        gpu_memory_utilization: float = 0.3,
        dtype: str = "auto",
        seed: int = 0,
        max_model_len: int | None = None,
        enable_prefix_caching: bool = True,
        add_special_tokens: bool = False,
        eos_token_ids: Sequence[int] | None = None,
        return_logprobs: bool = False,
        **llm_kwargs: Any,
    ) -> None:
        if not 0 < gpu_memory_utilization <= 1:
            raise ValueError(
                f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}."
            )
        vllm = _import_vllm()
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

        if dist_info_from_env().distributed:
            # Under torchrun: one engine per rank inside the torchrun processes (vLLM's
            # torchrun-compatible executor), each sampling its own rank's prompts.
            llm_kwargs.setdefault("distributed_executor_backend", "external_launcher")
        self.on_cpu = vllm_cpu.on_cpu()
        if self.on_cpu:
            dtype = vllm_cpu.cpu_engine_kwargs(llm_kwargs, dtype, max_model_len, model_path)
        self._vllm = vllm
        self._reload: bool | None = None  # whether the workers have reload_weights (lazy)
        self.return_logprobs = return_logprobs
        self.tokenizer = tokenizer
        self.add_special_tokens = add_special_tokens
        if eos_token_ids is None:
            eos = getattr(tokenizer, "eos_token_id", None)
            eos_token_ids = [] if eos is None else [int(eos)]
        self.eos_token_ids = sorted({int(i) for i in eos_token_ids})
        try:
            self.llm = vllm.LLM(
                model=str(model_path),
                tokenizer=str(model_path),
                gpu_memory_utilization=gpu_memory_utilization,
                dtype=dtype,
                seed=seed,
                max_model_len=max_model_len,
                enable_prefix_caching=enable_prefix_caching,
                tensor_parallel_size=1,
                **llm_kwargs,
            )
        except ValueError as err:
            if self.on_cpu and "memory" in str(err).lower():
                raise ValueError(
                    f"vLLM (CPU build) could not reserve its memory: {err} On CPU, give the "
                    "KV cache an explicit size: kv_cache_memory_bytes=<bytes> (default "
                    f"{vllm_cpu.CPU_KV_CACHE_BYTES}, smaller when memory is short) or the "
                    "environment variable VLLM_CPU_KVCACHE_SPACE=<GiB>; gpu_memory_utilization "
                    "is then not used to size it."
                ) from err
            raise

    @classmethod
    def from_model(
        cls, model: torch.nn.Module, tokenizer: Any, workdir: str | Path, **kwargs: Any
    ) -> VLLMGenerator:
        """Save an in-memory model and tokenizer to ``workdir`` and start vLLM from there."""

        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        inner = unwrap_model(model)
        if hasattr(inner, "get_base_model"):  # peft: save the merged base weights
            state = dict(hf_weights(inner))
            inner.get_base_model().save_pretrained(workdir, state_dict=state)  # type: ignore[operator]
        else:
            inner.save_pretrained(workdir)  # type: ignore[operator]
        tokenizer.save_pretrained(workdir)
        if "eos_token_ids" not in kwargs:  # the HF backend's stop set: tokenizer + model EOS
            kwargs["eos_token_ids"] = sorted(eos_token_ids(inner, tokenizer))
        return cls(workdir, tokenizer, **kwargs)

    def generate(
        self,
        prompts: Sequence[str],
        n: int,
        sampling: SamplingConfig,
        seed: int,
        *,
        prompt_indices: Sequence[int] | None = None,
    ) -> Rollout:
        """Sample ``n`` responses for each prompt (prompt-major rows, see :class:`Rollout`).

        Args:
            prompts: Prompt texts, ``[P]``.
            n: Samples per prompt.
            sampling: Temperature, top-p, token budget.
            seed: Seed of the call; prompt ``i`` is seeded with
                ``prompt_seeds(seed, prompt_indices)[i]``.
            prompt_indices: Global index of each prompt (default ``range(P)``); pass the
                indices in the global batch under data parallelism so that samples do not
                depend on the rank.

        Returns:
            The :class:`Rollout` of ``P * n`` rows.

        Raises:
            RuntimeError: the generator was closed (:meth:`close`).
        """
        if "llm" not in self.__dict__:
            raise RuntimeError("this VLLMGenerator was closed (close()); build a new one.")
        prompts = list(prompts)
        indices = list(range(len(prompts))) if prompt_indices is None else list(prompt_indices)
        if len(indices) != len(prompts):
            raise ValueError(
                f"prompt_indices has {len(indices)} entries for {len(prompts)} prompts."
            )
        encoded = self.tokenizer(prompts, add_special_tokens=self.add_special_tokens)["input_ids"]
        extra = {"logprobs": 0} if self.return_logprobs else {}
        params = [
            self._vllm.SamplingParams(
                **to_vllm_sampling_kwargs(sampling, n, s, self.eos_token_ids or None), **extra
            )
            for s in prompt_seeds(seed, indices)
        ]
        requests = [{"prompt_token_ids": list(ids)} for ids in encoded]
        outputs = self.llm.generate(requests, params, use_tqdm=False)
        rollout = Rollout([], [], [], [], [], n=n)
        logprobs: list[float] = []
        for text, ids, out in zip(prompts, encoded, outputs, strict=True):
            if len(out.outputs) != n:
                raise RuntimeError(f"vLLM returned {len(out.outputs)} samples, expected {n}.")
            for completion in out.outputs:
                response = [int(t) for t in completion.token_ids]
                rollout.prompts.append(text)
                rollout.prompt_ids.append(list(ids))
                rollout.response_ids.append(response)
                # As the HF backend: the whole response decoded without special tokens (an EOS
                # is dropped, a configured stop id that is an ordinary token is kept).
                rollout.completions.append(
                    self.tokenizer.decode(response, skip_special_tokens=True)
                )
                rollout.truncated.append(completion.finish_reason == "length")
                if self.return_logprobs:
                    logprobs.append(float(completion.cumulative_logprob))
        if self.return_logprobs:
            rollout.logprobs = logprobs
        return rollout

    def close(self) -> None:
        """Shut the engine down and free its KV cache; the generator cannot sample afterwards.
        A throwaway engine (Stage 1's, before training starts its own) must be closed: the
        in-process engine outlives the generator, so two KV caches would be held at once."""
        engine: Any = getattr(self.__dict__.pop("llm", None), "llm_engine", None)
        if hasattr(getattr(engine, "engine_core", None), "shutdown"):
            engine.engine_core.shutdown()
        del engine
        gc.collect()

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Load ``model``'s current weights into the engine and drop its prefix cache.

        Uses vLLM's in-place ``reload_weights`` when the workers have it (see the module
        docstring), else the model's ``load_weights``. Under FSDP2 every rank must call it
        (shards are gathered).
        """
        weights = list(hf_weights(model))
        if self._reload is None:
            self._reload = hasattr(self.llm, "collective_rpc") and all(
                self.llm.collective_rpc(_has_reload_weights)
            )
        if self._reload:
            self.llm.collective_rpc(
                "reload_weights",
                kwargs={"weights_iterator": weights, "is_checkpoint_format": True},
            )
        else:

            def load(vllm_model: Any) -> None:
                vllm_model.load_weights(weights)

            if hasattr(self.llm, "apply_model"):
                self.llm.apply_model(load)
            else:  # vLLM V0 engine (0.8.x)
                load(self.llm.llm_engine.model_executor.driver_worker.model_runner.model)
        if hasattr(self.llm, "reset_prefix_cache"):
            self.llm.reset_prefix_cache()
