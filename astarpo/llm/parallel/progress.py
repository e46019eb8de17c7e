"""The progress bars of the library's long loops (Stage 1, the Stage 2 trainer, evaluation).

One look for all of them: a ``tqdm`` bar that refreshes every 0.1 s on a terminal and every
30 s off one (a log shows the run is alive without being flooded), off with
``enabled=False`` (``progress=False``, ``--no-progress``; the trainer shows it on rank 0 only).
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm.auto import tqdm

__all__ = ["progress_bar"]


def progress_bar(
    total: int, desc: str, unit: str, *, initial: int = 0, enabled: bool = True
) -> Any:
    """A ``tqdm`` bar of ``total`` units, ``initial`` of them already done (a resumed run).

    Args:
        total: The work to do.
        desc: Its label (``"train"``, ``"eval"``, ``"Stage 1 (V*)"``).
        unit: The unit of ``total`` (``"step"``, ``"prompt"``).
        initial: Units already done.
        enabled: Show it (else a disabled bar: its calls do nothing).
    """
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        initial=initial,
        disable=not enabled,
        mininterval=0.1 if sys.stderr.isatty() else 30,
        miniters=1,
    )
