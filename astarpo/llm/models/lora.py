"""LoRA policies whose reference is the same model with the adapters switched off.

A*-PO's Stage 2 regresses ``beta2 * log(pi(y|x) / pi_ref(y|x))`` onto the optimal advantage, so
every step needs ``logp_ref`` of the sampled responses. With full fine-tuning that means a
second, frozen copy of the weights. With LoRA the policy is ``W + B A`` on top of frozen base
weights ``W``, and the reference is exactly the base model, so the reference log-probs come
from the *same* module run with the adapters disabled (peft's ``disable_adapter()`` context):
no second copy of the weights is held. Memory held by the weights drops from
``2 |W|`` to ``|W| + |A| + |B|``.

Typical use::

    policy = apply_lora(model, r=16, alpha=32)
    ref_model = AdapterDisabledReference(policy)   # holds no parameters of its own
    trainer = AStarPOTrainer(policy, ref_model, ...)

``AdapterDisabledReference`` behaves like a causal LM (its ``forward`` is the policy's forward
with adapters off), so code that computes reference log-probs from a ``ref_model`` works as is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn

from astarpo.llm.parallel.dist import unwrap_model

__all__ = [
    "DEFAULT_TARGET_MODULES",
    "AdapterDisabledReference",
    "adapters_disabled",
    "apply_lora",
    "is_lora_model",
    "maybe_apply_lora",
    "parameter_bytes",
]

DEFAULT_TARGET_MODULES: tuple[str, ...] = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)
"""The linear layers of Qwen2/Llama-style decoders that get adapters by default."""


def apply_lora(
    model: nn.Module,
    *,
    r: int = 16,
    alpha: int = 32,
    dropout: float = 0.0,
    target_modules: Sequence[str] = DEFAULT_TARGET_MODULES,
    seed: int | None = None,
) -> nn.Module:
    """Wrap a causal LM in a peft LoRA model (base weights frozen, adapters trainable).

    peft initialises ``B = 0``, so the returned policy starts exactly at the base model (the
    reference).

    Args:
        model: A Hugging Face causal LM.
        r: Adapter rank, ``>= 1``. Default 16.
        alpha: LoRA scaling numerator (the update is ``alpha / r * B A``). Default 32.
        dropout: Dropout on the adapter input, in [0, 1). Default 0 (keeps the log-probs of the
            sampled responses deterministic).
        target_modules: Names of the linear layers to adapt. Default
            :data:`DEFAULT_TARGET_MODULES`.
        seed: Seed for the adapters' ``A`` initialisation (``None``: the global torch RNG).

    Returns:
        The ``peft.PeftModel``.

    Raises:
        ValueError: Bad ``r``, ``alpha`` or ``dropout``.
        ImportError: peft is not installed.
    """
    if r < 1:
        raise ValueError(f"LoRA rank r must be >= 1, got {r}.")
    if alpha <= 0:
        raise ValueError(f"LoRA alpha must be > 0, got {alpha}.")
    if not 0 <= dropout < 1:
        raise ValueError(f"LoRA dropout must be in [0, 1), got {dropout}.")
    try:
        from peft import LoraConfig, get_peft_model  # the llm extra, only when LoRA is used
    except ImportError as err:  # pragma: no cover - peft is in the llm extra
        raise ImportError("LoRA needs peft: pip install 'astarpo[llm]'.") from err
    config = LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=list(target_modules),
        task_type="CAUSAL_LM",
    )
    fork = torch.random.fork_rng() if seed is not None else contextlib.nullcontext()
    with fork:
        if seed is not None:
            torch.manual_seed(seed)
        return get_peft_model(model, config)


def maybe_apply_lora(
    model: Any, ref_model: Any, lora_r: int, lora_alpha: int = 32, seed: int = 0
) -> tuple[Any, Any]:
    """The trainer's LoRA hook: ``(policy, reference)`` for ``lora_r`` (0 = unchanged).

    With ``lora_r > 0`` the policy gets adapters (:func:`apply_lora`, unless it already has
    them) and the reference becomes :class:`AdapterDisabledReference` of it; a separate
    ``ref_model`` passed in is then not used (pass ``None`` to avoid building it).
    """
    if lora_r <= 0:
        return model, ref_model
    if not is_lora_model(model):
        model = apply_lora(model, r=lora_r, alpha=lora_alpha, seed=seed)
    return model, AdapterDisabledReference(model)


def _inner(model: nn.Module) -> nn.Module:
    return unwrap_model(model)


def is_lora_model(model: nn.Module) -> bool:
    """True for a peft model (possibly inside DDP) that can disable its adapters."""
    return hasattr(_inner(model), "disable_adapter")


@contextlib.contextmanager
def adapters_disabled(model: nn.Module) -> Iterator[nn.Module]:
    """Context in which ``model`` (peft, possibly inside DDP) computes the base model.

    Yields the unwrapped peft module to call (calling the DDP wrapper inside would start a
    gradient synchronisation for a reference pass).

    Raises:
        TypeError: ``model`` is not a peft model.
    """
    inner = _inner(model)
    if not hasattr(inner, "disable_adapter"):
        raise TypeError(
            f"{type(inner).__name__} has no adapters to disable: wrap the policy with "
            "apply_lora() (or train without --lora and pass a separate reference model)."
        )
    with inner.disable_adapter():  # type: ignore[operator]
        yield inner


class AdapterDisabledReference(nn.Module):
    """The reference policy as a view of a LoRA policy with its adapters disabled.

    It does not register the policy as a submodule and copies no weights. ``parameters()``
    yields the policy's *frozen* parameters (the base weights, which are the reference's
    weights), never the adapters, so ``requires_grad_(False)``, ``eval()`` or ``.to()`` on the
    reference never touch what is trained. ``forward`` runs the policy's forward inside
    :func:`adapters_disabled`; run it under ``torch.no_grad()`` as for any reference.

    Args:
        policy: A model returned by :func:`apply_lora` (possibly wrapped in DDP or FSDP2).
    """

    def __init__(self, policy: nn.Module) -> None:
        super().__init__()
        if not is_lora_model(policy):
            raise TypeError(
                "AdapterDisabledReference needs a LoRA policy (apply_lora); got "
                f"{type(_inner(policy)).__name__}."
            )
        object.__setattr__(self, "_policy", policy)

    @property
    def policy(self) -> nn.Module:
        """The LoRA policy this reference views."""
        policy: nn.Module = object.__getattribute__(self, "_policy")
        return policy

    @property
    def config(self) -> Any:
        """The base model's config (as on a Hugging Face model)."""
        return getattr(_inner(self.policy), "config", None)

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]:
        """The policy's frozen (base) parameters: the weights of the reference."""
        return (p for p in self.policy.parameters() if not p.requires_grad)

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, nn.Parameter]]:
        """Names and frozen (base) parameters of the policy (see :meth:`parameters`)."""
        for name, p in self.policy.named_parameters(prefix, recurse, remove_duplicate):
            if not p.requires_grad:
                yield name, p

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The base model's forward: the policy's with adapters disabled."""
        with adapters_disabled(self.policy) as inner:
            return inner(*args, **kwargs)


def parameter_bytes(*modules: nn.Module) -> int:
    """Bytes of the distinct tensor storages held as parameters and buffers by ``modules``.

    Storages are counted once even when shared between modules (as the base weights of a LoRA
    policy and its :class:`AdapterDisabledReference` are), so this is the memory the weights
    actually occupy.
    """
    seen: dict[tuple[str, int], int] = {}
    for module in modules:
        for tensor in [*module.parameters(), *module.buffers()]:
            storage = tensor.untyped_storage()
            seen[(str(tensor.device), storage.data_ptr())] = storage.nbytes()
    return sum(seen.values())
