"""Hugging Face datasets as prompt sources: a ``save_to_disk`` folder (offline) or a hub name.

Used by :func:`~astarpo.llm.data.prompts.read_records`, so ``--data`` and ``load_prompts`` take
them like a file. ``datasets`` is imported only here, only when such a source is named.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["is_saved_dataset", "read_hf_dataset"]


def read_hf_dataset(spec: str) -> list[dict[str, Any]]:
    """Rows of a Hugging Face dataset: a folder written by ``Dataset.save_to_disk`` (read
    offline), or ``"hf:NAME[:CONFIG]:SPLIT"`` / ``"hf:NAME"`` (split ``train``) fetched from the
    hub by ``datasets.load_dataset`` (the only place astarpo contacts a hub for data, and only
    when the user names a remote dataset).

    Raises:
        ImportError: if ``datasets`` (the ``llm`` extra) is not installed.
        ValueError: if a ``save_to_disk`` folder holds several splits (name one: ``DIR/train``).
    """
    import datasets  # the llm extra

    if spec.startswith("hf:"):
        parts = spec[3:].split(":")
        name, config, split = parts[0], None, "train"
        if len(parts) == 2:
            split = parts[1]
        elif len(parts) >= 3:
            config, split = parts[1], parts[2]
        data: Any = datasets.load_dataset(name, config, split=split)
    else:
        data = datasets.load_from_disk(spec)
        if isinstance(data, datasets.DatasetDict):
            raise ValueError(
                f"{spec} holds the splits {sorted(data)}; pass one of them, e.g. {spec}/train."
            )
    return [dict(r) for r in data]


def is_saved_dataset(p: Path) -> bool:
    """Whether ``p`` is a folder written by ``save_to_disk`` (a ``Dataset`` or ``DatasetDict``)."""
    return p.is_dir() and any(
        (p / f).is_file() for f in ("dataset_info.json", "state.json", "dataset_dict.json")
    )
