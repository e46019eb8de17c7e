"""Hugging Face datasets as prompt sources: a ``save_to_disk`` folder (offline) or a hub name.

Used by :func:`~astarpo.llm.data.prompts.read_records`, so ``--data`` and ``load_prompts`` take
them like a file. ``datasets`` is imported only here, only when such a source is named.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["hub_reachable", "is_saved_dataset", "parse_hf_spec", "read_hf_dataset"]

_FORM = "hf:NAME, hf:NAME:SPLIT or hf:NAME:CONFIG:SPLIT (e.g. hf:openai/gsm8k:main:train)"


def parse_hf_spec(spec: str) -> tuple[str, str | None, str]:
    """``"hf:NAME[:CONFIG]:SPLIT"`` -> ``(name, config or None, split)``; ``"hf:NAME"`` has the
    split ``train``.

    Raises:
        ValueError: an empty name, config or split, or more than three fields.
    """
    parts = spec[3:].split(":") if spec.startswith("hf:") else [""]
    if len(parts) > 3 or any(not p.strip() for p in parts):
        raise ValueError(f"data {spec!r} is not a hub dataset spec; write {_FORM}.")
    if len(parts) == 1:
        return parts[0], None, "train"
    if len(parts) == 2:
        return parts[0], None, parts[1]
    return parts[0], parts[1], parts[2]


def hub_reachable(endpoint: str, timeout: float = 5.0) -> bool:
    """Whether an HTTP request to ``endpoint`` gets any answer within ``timeout`` seconds
    (proxies from the environment are used; a name lookup that hangs counts as unreachable)."""
    answer: list[bool] = []

    def probe() -> None:
        try:
            urllib.request.urlopen(endpoint, timeout=timeout).close()
            answer.append(True)
        except urllib.error.HTTPError:  # the server answered (e.g. 403): reachable
            answer.append(True)
        except (OSError, ValueError):
            answer.append(False)

    thread = threading.Thread(target=probe, name="hub probe", daemon=True)
    thread.start()
    thread.join(timeout + 1.0)
    return bool(answer and answer[0])


def read_hf_dataset(spec: str) -> list[dict[str, Any]]:
    """Rows of a Hugging Face dataset: a folder written by ``Dataset.save_to_disk`` (read
    offline), or ``"hf:NAME[:CONFIG]:SPLIT"`` / ``"hf:NAME"`` (split ``train``) fetched from the
    hub by ``datasets.load_dataset`` (the only place astarpo contacts a hub for data, and only
    when the user names a remote dataset).

    A malformed spec is refused before ``datasets`` is imported. Offline, a hub dataset fails
    fast: with ``HF_HUB_OFFLINE`` set and the dataset not in the local cache, or, without it,
    when the hub does not answer within 5 s (rather than after ``datasets``' retries); set
    ``HF_HUB_OFFLINE=1`` to read a cached dataset without a network.

    Raises:
        ImportError: if ``datasets`` (the ``llm`` extra) is not installed.
        ValueError: if the ``hf:`` spec is malformed, the hub is unreachable or offline mode
            finds no cached copy, or a ``save_to_disk`` folder holds several splits (name one:
            ``DIR/train``).
    """
    hub = spec.startswith("hf:")
    if hub:
        name, config, split = parse_hf_spec(spec)
    import datasets  # the llm extra

    if hub:
        from huggingface_hub import constants

        if not constants.HF_HUB_OFFLINE and not hub_reachable(constants.ENDPOINT):
            raise ValueError(
                f"data {spec!r}: the Hugging Face hub ({constants.ENDPOINT}) does not answer (no "
                "network?). Set HF_HUB_OFFLINE=1 to read a copy in the local cache, or pass a "
                "folder saved with Dataset.save_to_disk or a .jsonl/.parquet file."
            )
        try:
            data: Any = datasets.load_dataset(name, config, split=split)
        except Exception as e:
            if not constants.HF_HUB_OFFLINE:
                raise
            raise ValueError(
                f"data {spec!r} is not in the local cache, and HF_HUB_OFFLINE is set, so nothing "
                f"is downloaded ({type(e).__name__}: {e}). Unset HF_HUB_OFFLINE to download it, "
                "or pass a folder saved with Dataset.save_to_disk."
            ) from e
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
