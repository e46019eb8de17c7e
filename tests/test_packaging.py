"""The built wheel carries the evaluation sets (package data), so a non-editable install can
evaluate from any directory."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "astarpo" / "llm" / "data" / "benchmarks"


def test_wheel_contains_the_benchmarks(tmp_path):
    pytest.importorskip("setuptools")
    src = tmp_path / "src"  # a copy, so the build leaves nothing in the checkout
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    shutil.copytree(ROOT / "astarpo", src / "astarpo", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    out = subprocess.run(
        [*cmd, "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    (wheel,) = (tmp_path / "dist").glob("astarpo-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = sorted(p.name for p in BENCH.iterdir() if p.is_file())
    assert "math500.jsonl" in shipped and "README.md" in shipped
    missing = [n for n in shipped if f"astarpo/llm/data/benchmarks/{n}" not in names]
    assert not missing, f"not in the wheel: {missing}"


def test_every_from_pretrained_says_whether_it_may_download():
    """Nothing contacts a hub unless the user names a remote model: every ``from_pretrained``
    call in the package passes ``local_files_only`` (True, or True for a local directory in
    :mod:`astarpo.llm.models.loading`)."""
    import ast

    bad = []
    for path in sorted((ROOT / "astarpo").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "from_pretrained"
            ):
                names = {k.arg for k in node.keywords}
                if "local_files_only" not in names and not any(
                    k.arg is None for k in node.keywords
                ):
                    bad.append(f"{rel}:{node.lineno}")
    assert bad == []
