"""One run of a study in its own process: ``python -m astarpo.studies.harness.worker SPEC OUT``.

The spec (JSON) names the function that makes the run, ``"entry": "MODULE:FUNCTION"`` (e.g.
``astarpo.studies.efficiency.worker:run_one``), called with the spec; its result (a JSON-ready
dict) is written to ``OUT``. The spec's path entries (``"paths"``) must be absolute, and are
checked before anything is loaded: in the run's folder a relative path names another file, and a
model path naming no folder would be taken for a hub id.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["check_spec_paths", "entry_point", "main"]


def check_spec_paths(spec: dict[str, Any]) -> None:
    """Refuse (``ValueError``, naming each and the fix) a spec whose ``paths`` are relative."""
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


def entry_point(name: str) -> Any:
    """The function ``"MODULE:FUNCTION"`` names (``ValueError`` for another form)."""
    module, _, function = name.partition(":")
    if not module or not function:
        raise ValueError(f"run spec: entry {name!r} is not 'MODULE:FUNCTION'.")
    return getattr(importlib.import_module(module), function)


def main(argv: list[str]) -> int:
    """Read the spec, check its paths, run its entry and write the result."""
    spec_path, out_path = argv
    spec = json.loads(Path(spec_path).read_text())
    check_spec_paths(spec)
    Path(out_path).write_text(json.dumps(entry_point(spec["entry"])(spec), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
