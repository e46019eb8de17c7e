"""What the benchmark scripts share: :func:`parser` (flags typed by their defaults),
:func:`seconds` (a timed call) and :func:`child_result` (a child process's JSON line, through
the harness's ``run_process``)."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any


def parser(description: str | None, **flags: Any) -> argparse.ArgumentParser:
    """A parser with one ``--name`` flag per keyword (``_`` written ``-``), of its default's
    type; a value ``(default, help)`` adds the help."""
    ap = argparse.ArgumentParser(description=description)
    for name, value in flags.items():
        default, text = value if isinstance(value, tuple) else (value, None)
        ap.add_argument(
            f"--{name.replace('_', '-')}", type=type(default), default=default, help=text
        )
    return ap


def seconds(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    """``(wall seconds, result)`` of ``fn(*args, **kwargs)``."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - t0, out


def child_result(cmd: Sequence[str], name: str, **popen: Any) -> dict[str, Any]:
    """The last line ``cmd`` prints, as JSON (``SystemExit`` naming ``name`` if it fails; its
    stderr passes through). ``popen``: ``run_process``'s keywords (``env``, ``cwd``)."""
    from experiments.harness.runner import run_process

    with tempfile.TemporaryFile("w+") as out:
        code, _, _ = run_process(cmd, stdout=out, **popen)
        if code:
            raise SystemExit(f"{name} failed (exit code {code})")
        out.seek(0)
        return dict(json.loads(out.read().strip().splitlines()[-1]))
