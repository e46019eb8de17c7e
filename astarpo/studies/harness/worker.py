"""One run of a study in its own process: ``python -m astarpo.studies.harness.worker SPEC OUT``.

:class:`~astarpo.studies.harness.runner.Runner` starts it in the run's folder. The spec (JSON)
names the function that makes the run, ``"entry": "MODULE:FUNCTION"`` (a study's worker
module, e.g. ``astarpo.studies.efficiency.worker:run_one``), which is called with the spec and
returns the run's result (a JSON-ready dict), written to ``OUT``. The spec's path entries
(``"paths"``) must be absolute, and are checked before anything is loaded: in the run's folder
a relative path names another file, and a reference model path that names no folder would be
taken for a hub id.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["check_spec_paths", "entry_point", "main"]


def check_spec_paths(spec: dict[str, Any]) -> None:
    """Refuse a run spec whose path entries (``spec["paths"]``, where given) are relative.

    Raises:
        ValueError: naming each relative entry and the fix.
    """
    relative = [
        f"{key}={spec[key]!r}"
        for key in spec.get("paths", ())
        if spec.get(key) is not None and not Path(spec[key]).is_absolute()
    ]
    if relative:
        raise ValueError(
            f"run spec: relative paths {', '.join(relative)}; a worker runs in its own run "
            "folder, where they do not resolve. Write absolute paths into the spec (the Runner "
            "does: Path.resolve())."
        )


def entry_point(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The function ``"MODULE:FUNCTION"`` names.

    Raises:
        ValueError: ``name`` is not of that form.
    """
    module, _, function = name.partition(":")
    if not module or not function:
        raise ValueError(f"run spec: entry {name!r} is not 'MODULE:FUNCTION'.")
    fn: Callable[[dict[str, Any]], dict[str, Any]] = getattr(
        importlib.import_module(module), function
    )
    return fn


def main(argv: list[str]) -> int:
    """Read the spec, check its paths, run its entry and write the result."""
    spec_path, out_path = argv
    spec = json.loads(Path(spec_path).read_text())
    check_spec_paths(spec)
    result = entry_point(spec["entry"])(spec)
    Path(out_path).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
