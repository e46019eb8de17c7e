"""The trainer's arguments as a TRL user passes them, resolved to what the loop needs.

* ``model`` / ``ref_model``: a model object, ``"toy"`` (the embedded tiny model), a local
  directory (read with ``local_files_only=True``) or a hub id (downloaded only because the user
  named it), through :func:`~astarpo.llm.models.loading.resolve_model`.
* ``processing_class`` (TRL's name) or ``tokenizer``: the tokenizer; when neither is given it is
  loaded from the model's directory.
* ``reward_funcs``: one callable, a ``"module:function"`` / built-in name, or a list of them
  (:func:`~astarpo.llm.rewards.scoring.as_reward_funcs`).
* ``train_dataset``: a ``datasets.Dataset`` or a list of dicts, text or conversational prompts
  (:func:`~astarpo.llm.data.rows.as_rows`), visited in the order of :class:`EpochOrder`: a
  seeded permutation per epoch.

Epoch ``e`` visits the rows in the order
``numpy.random.default_rng(derive_seed(seed, "epoch", e)).permutation(n)``;
a step takes the next ``batch_size`` of them, crossing into the next epoch when one runs out.
The position ``(epoch, index)`` is saved in checkpoints, so a resumed run continues exactly where
the interrupted one stopped. The permutation is computed once per epoch, not once per step.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from astarpo.llm.data.rows import as_rows
from astarpo.llm.models.fit import check_sampling_fits
from astarpo.llm.models.loading import named_tokenizer, resolve_model
from astarpo.llm.rollout.base import derive_seed

__all__ = ["EpochOrder", "frozen_reference", "resolve_inputs", "resolve_tokenizer"]


def frozen_reference(model: Any, ref_model: Any, device: Any) -> Any:
    """The reference the loop reads: ``ref_model`` (or, when ``None``, a copy of ``model`` as it
    is now) on ``device``, in eval mode, with no gradients."""
    if ref_model is None:
        ref_model = copy.deepcopy(model)  # the policy as it starts
    return ref_model.to(device).eval().requires_grad_(False)


def resolve_tokenizer(model: Any, tokenizer: Any, processing_class: Any, loaded: Any) -> Any:
    """The tokenizer from ``processing_class`` (TRL's name) or ``tokenizer`` (not both), else
    the one loaded with the model, else the one its config names (``"toy"`` or a local
    directory, :func:`~astarpo.llm.models.loading.named_tokenizer`).

    Raises:
        ValueError: if both are given and differ, or no tokenizer can be found locally.
    """
    if tokenizer is not None and processing_class is not None and tokenizer is not processing_class:
        raise ValueError("give the tokenizer once: processing_class=... (TRL) or tokenizer=...")
    tok = processing_class if processing_class is not None else tokenizer
    if tok is not None:
        return tok
    if loaded is not None:
        return loaded
    named = named_tokenizer(model)
    if named is not None:
        return named
    name = getattr(getattr(model, "config", None), "_name_or_path", "")
    raise ValueError(
        f"no tokenizer: pass processing_class=tokenizer (the model's config names {name!r}, "
        "which is not a local directory; nothing is downloaded)."
    )


def resolve_inputs(
    model: Any,
    ref_model: Any,
    tokenizer: Any,
    processing_class: Any,
    train_dataset: Any,
    args: Any,
) -> tuple[Any, Any, Any, list[dict[str, Any]]]:
    """``(model, ref_model, tokenizer, rows)`` of the trainer: models loaded when named, the
    tokenizer found, the dataset as rows (conversational prompts rendered), and the rows
    checked against the model (:func:`~astarpo.llm.models.fit.check_sampling_fits`: characters
    its tokenizer cannot encode, prompt + ``max_new_tokens`` past its positions; the prompts
    tokenized once, in one batched call).

    Raises:
        ValueError: on an empty dataset or rows the model cannot read.
    """
    model, loaded = resolve_model(model)
    ref_model, _ = resolve_model(ref_model, "ref_model")
    tokenizer = resolve_tokenizer(model, tokenizer, processing_class, loaded)
    rows = as_rows(train_dataset, tokenizer)
    if not rows:
        raise ValueError("train_dataset is empty.")
    check_sampling_fits(rows, tokenizer, model, args.max_new_tokens, "train_dataset")
    return model, ref_model, tokenizer, rows


class EpochOrder:
    """Seeded per-epoch permutations of ``range(n)``, consumed ``batch_size`` rows at a time.

    Args:
        n: Number of rows, >= 1.
        seed: Seed of the permutations.

    Attributes:
        epoch: The current epoch.
        index: Rows of the current epoch already taken.
    """

    def __init__(self, n: int, seed: int) -> None:
        if n < 1:
            raise ValueError(f"EpochOrder needs at least one row, got n={n}.")
        self.n = n
        self.seed = seed
        self.epoch = 0
        self.index = 0
        self._perm: tuple[int, np.ndarray] | None = None

    def permutation(self, epoch: int) -> np.ndarray:
        """The row order of ``epoch`` ``[n]`` (cached for the current epoch)."""
        if self._perm is None or self._perm[0] != epoch:
            rng = np.random.default_rng(derive_seed(self.seed, "epoch", epoch))
            self._perm = (epoch, rng.permutation(self.n))
        return self._perm[1]

    def state_dict(self) -> dict[str, int]:
        """The position (``data_epoch``, ``data_index``), as a checkpoint stores it."""
        return {"data_epoch": self.epoch, "data_index": self.index}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a position of :meth:`state_dict`."""
        self.epoch, self.index = int(state["data_epoch"]), int(state["data_index"])

    @contextlib.contextmanager
    def given_back_on(self, *errors: type[BaseException]) -> Iterator[None]:
        """Rows taken inside the block are given back (the position restored) when it raises
        one of ``errors``: the step they were taken for did not happen."""
        start = self.state_dict()
        try:
            yield
        except errors:
            self.load_state_dict(start)
            raise

    def take(self, batch_size: int) -> list[int]:
        """The next ``batch_size`` row indices (advancing the position)."""
        out: list[int] = []
        while len(out) < batch_size:
            perm = self.permutation(self.epoch)
            chunk = perm[self.index : self.index + batch_size - len(out)]
            out.extend(int(i) for i in chunk)
            self.index += len(chunk)
            if self.index >= self.n:
                self.epoch, self.index = self.epoch + 1, 0
        return out
