"""Progress of the long loops (Stage 1, training, evaluation) on a terminal and in a log.

On a terminal :class:`Progress` is a tqdm bar; elsewhere (output redirected to a file, a
scheduler's log) it prints one plain line after the first update and then at least every
``every`` seconds, with the count done, the rate and the time left, so a log shows that a run is
alive and how far it is.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

__all__ = ["Progress", "format_seconds"]


def format_seconds(s: float) -> str:
    """``3725`` -> ``"1h02m05s"``, ``65`` -> ``"1m05s"``, ``7.2`` -> ``"7s"``."""
    total = round(s)
    h, rem = divmod(total, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


class Progress:
    """A progress display of ``total`` units.

    Args:
        total: Units to do (steps, prompts, ...).
        desc: Name of the loop, first on each line.
        unit: Name of a unit (``"step"``, ``"prompt"``).
        enabled: Show anything at all (e.g. only on the main process).
        initial: Units already done (a resumed run); not counted in the rate.
        every: Seconds between two lines when the stream is not a terminal.
        stream: Where to write (default ``sys.stderr``, like tqdm).
    """

    def __init__(
        self,
        total: int,
        desc: str,
        unit: str,
        enabled: bool = True,
        initial: int = 0,
        every: float = 30.0,
        stream: TextIO | None = None,
    ) -> None:
        self.total, self.desc, self.unit, self.every = total, desc, unit, every
        self.done = self.initial = initial
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.bar: Any = None
        self.t0 = self.last = time.monotonic()
        self.printed = False
        self.postfix: dict[str, Any] = {}
        if enabled and self.stream.isatty():
            from tqdm.auto import tqdm  # the llm extra

            self.bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, file=self.stream)

    def line(self) -> str:
        """The plain progress line of now."""
        elapsed = time.monotonic() - self.t0
        new = self.done - self.initial
        rate = new / elapsed if elapsed > 0 else 0.0
        pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        eta = format_seconds((self.total - self.done) / rate) if rate > 0 else "?"
        extra = "".join(f", {k} {v}" for k, v in self.postfix.items())
        return (
            f"{self.desc}: {self.done}/{self.total} {self.unit}s{pct}, {rate:.3g} {self.unit}/s, "
            f"elapsed {format_seconds(elapsed)}, ETA {eta}{extra}"
        )

    def update(self, n: int = 1, **postfix: Any) -> None:
        """``n`` more units done; ``postfix`` values are shown after the counts."""
        self.done += n
        self.postfix.update(postfix)
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(n)
            if postfix:
                self.bar.set_postfix(**postfix)
            return
        now = time.monotonic()
        if not self.printed or now - self.last >= self.every:
            print(self.line(), file=self.stream, flush=True)
            self.printed, self.last = True, now

    def close(self) -> None:
        """End the display (a last line when not on a terminal and something was done)."""
        if self.bar is not None:
            self.bar.close()
        elif self.enabled and self.done > self.initial and self.printed:
            if time.monotonic() - self.last > 0:
                print(self.line(), file=self.stream, flush=True)
