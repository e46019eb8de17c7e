"""The trained policy as a plain Hugging Face model folder: what ``Trainer.save_model`` writes.

:func:`save_final_model` writes the weights (FSDP2 shards gathered, LoRA adapters merged) and
the tokenizer with ``save_pretrained``, so ``AutoModelForCausalLM.from_pretrained(folder)``
reloads the trained policy. :func:`save_model_folder` adds the folder policy: a folder it writes
gets a small ``astarpo_model.json`` (:data:`SAVED_BY`: what saved it, at which step); saving
again into such a folder replaces the model; a non-empty folder without it (a user's files, a
base model's directory) is refused unless ``overwrite=True``, so a ``config.json`` or weights
astarpo did not write are never replaced silently. The default ``OUT/final`` lies in the run
directory, which the run owns.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import torch

from astarpo.llm.data.files import disk_full
from astarpo.llm.parallel.dist import barrier, is_main_process, unwrap_model
from astarpo.llm.parallel.state import hf_weights

__all__ = ["SAVED_BY", "check_model_folder", "save_final_model", "save_model_folder"]

SAVED_BY = "astarpo_model.json"
"""The file that marks a folder written by :func:`save_model_folder`."""


def check_model_folder(out: Path, *, owned: bool, overwrite: bool = False) -> None:
    """Refuse to save a model into ``out`` when that would replace files astarpo did not write.

    Args:
        out: The model folder.
        owned: The run owns ``out`` (the default ``OUT/final``): anything in it may be replaced.
        overwrite: Replace a folder astarpo did not write all the same.

    Raises:
        FileExistsError: ``out`` is a file, or (unless ``owned`` or ``overwrite``) a non-empty
            folder without :data:`SAVED_BY`.
    """
    if out.exists() and not out.is_dir():
        raise FileExistsError(
            f"save_model: {str(out)!r} is a file, not a folder; give a folder path "
            "(save_pretrained writes config.json, the weights and the tokenizer into it)."
        )
    foreign = out.is_dir() and any(out.iterdir()) and not (out / SAVED_BY).is_file()
    if foreign and not owned and not overwrite:
        names = sorted(p.name for p in out.iterdir())[:5]
        raise FileExistsError(
            f"save_model: {str(out)!r} is a non-empty folder astarpo did not write (it holds "
            f"{names}); saving would overwrite its files. Give a new or empty folder, or "
            "pass overwrite=True."
        )


def save_model_folder(
    model: torch.nn.Module,
    tokenizer: Any,
    out: str | Path,
    *,
    step: int,
    owned: bool = False,
    overwrite: bool = False,
) -> Path:
    """:func:`check_model_folder`, then :func:`save_final_model` and the :data:`SAVED_BY` mark
    (rank 0; every rank must call it).

    Returns:
        ``out`` as a ``Path``.

    Raises:
        FileExistsError: see :func:`check_model_folder`.
        OSError: ``errno.ENOSPC`` naming ``out`` when the disk is full.
    """
    out = Path(out)
    check_model_folder(out, owned=owned, overwrite=overwrite)
    save_final_model(model, tokenizer, out)
    if is_main_process():
        saved = {"saved_by": "astarpo Trainer.save_model", "step": step}
        (out / SAVED_BY).write_text(json.dumps(saved) + "\n")
    return out


def save_final_model(model: torch.nn.Module, tokenizer: Any, path: str | Path) -> Path:
    """Save the trained policy as a plain Hugging Face model directory, once (rank 0).

    Works for a plain, DDP, FSDP2 (shards gathered: every rank must call it) or LoRA policy
    (adapters merged into the weights, so ``AutoModelForCausalLM.from_pretrained(path)`` loads
    the trained policy without peft).

    Returns:
        ``path``.

    Raises:
        OSError: ``errno.ENOSPC`` naming ``path`` when the disk is full (the run's checkpoints
            are not touched).
    """
    path = Path(path)
    state = {name: t.detach().cpu().clone() for name, t in hf_weights(model)}
    if is_main_process():
        inner: Any = unwrap_model(model)
        base = inner.get_base_model() if hasattr(inner, "get_base_model") else inner
        try:
            base.save_pretrained(path, state_dict=state)
            if tokenizer is not None:
                tokenizer.save_pretrained(path)
        except Exception as e:  # safetensors wraps ENOSPC in a SafetensorError
            if disk_full(e, path.parent):
                raise OSError(
                    errno.ENOSPC,
                    f"no space left on device while saving the model to {path} ({e}); the "
                    "folder holds a partial copy, the run's checkpoints are intact. Free space "
                    "and save again (astarpo train: --resume saves the final model again).",
                ) from e
            raise
    barrier()
    return path
