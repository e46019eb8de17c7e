"""The docs render formulas offline: MathJax is copied into the built site and a page opened in
headless Chromium with no network shows typeset math (``docs/check_offline_math.py``; ``make
docs`` runs the same check on the real site). Skipped, with the reason, without Chromium."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location(
    "check_offline_math", ROOT / "docs" / "check_offline_math.py"
)
assert spec is not None and spec.loader is not None
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)

PAGE = (
    "# Math\n\nThe objective $J_\\beta(\\pi) = E[r] - \\beta\\,\\mathrm{KL}$ and\n\n"
    "$$V^*(x) = \\beta_1 \\log E[e^{r/\\beta_1}]$$\n"
)


def _build(tmp_path: Path, offline: bool) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    exts = ["myst_parser", "sphinx.ext.mathjax"] + (["sphinx-mathjax-offline"] if offline else [])
    (src / "conf.py").write_text(
        f"extensions = {exts!r}\nmyst_enable_extensions = ['dollarmath']\n"
        "source_suffix = {'.md': 'markdown'}\n"
    )
    (src / "index.md").write_text(PAGE)
    out = tmp_path / "html"
    cmd = [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(src), str(out)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    return out / "index.html"


@pytest.fixture(scope="module")
def chromium():
    path = check.find_chromium()
    if path is None:
        pytest.skip("no chromium on PATH (apt-get install chromium): offline math not checked")
    return path


def test_formulas_render_with_no_network(tmp_path, chromium):
    pytest.importorskip("myst_parser")
    if importlib.util.find_spec("sphinx-mathjax-offline") is None:
        pytest.skip("sphinx-mathjax-offline is not installed (the docs extra)")
    page = _build(tmp_path, offline=True)
    assert (page.parent / "_static" / "mathjax" / "tex-chtml.js").is_file()
    assert check.problems(check.rendered_dom(page, chromium)) == []


def test_a_cdn_mathjax_fails_the_check(tmp_path, chromium):
    """The check can fail: Sphinx's default MathJax comes from a CDN, unreachable here."""
    pytest.importorskip("myst_parser")
    page = _build(tmp_path, offline=False)
    found = check.problems(check.rendered_dom(page, chromium))
    assert any("mjx-container" in p for p in found) and any("raw math" in p for p in found)
