"""Every committed figure under docs/ is readable where the page shows it.

The docs theme shows a figure at its natural size up to the content width (about 736 CSS px,
96 px per inch). A figure of ``px`` pixels at ``dpi`` whose smallest text is ``FONT`` pt shows
that text at ``FONT * dpi * min(px, 736) / (96 * px)`` pt, which must be at least 9 pt. The
theory figures hold their text at >= ``FONT`` pt by construction (``astarpo.analysis.figures``
checks every text before it saves); this test checks the committed PNGs' size and dpi.
"""

from __future__ import annotations

from pathlib import Path

import pytest

PIL = pytest.importorskip("PIL.Image")

pytestmark = pytest.mark.pages

DOCS = Path(__file__).resolve().parents[1] / "docs"
FIGURES = sorted(p for p in DOCS.rglob("*.png") if "_build" not in p.parts)
CONTENT_PX = 736  # the docs theme's content width in CSS px
FONT = 10.0  # the smallest text the figures are drawn with, in pt
MIN_SHOWN_PT = 9.0
MIN_DPI = 150


def test_there_are_figures() -> None:
    assert len(FIGURES) >= 10


@pytest.mark.parametrize("path", FIGURES, ids=[str(p.relative_to(DOCS)) for p in FIGURES])
def test_figure_resolution_and_shown_text_size(path: Path) -> None:
    with PIL.open(path) as im:
        width, height = im.size
        dpi = im.info.get("dpi", (0, 0))[0]
    assert dpi >= MIN_DPI - 0.5, f"{path.name}: saved at {dpi:.0f} dpi, needs >= {MIN_DPI}"
    shown_pt = FONT * dpi * min(width, CONTENT_PX) / (96 * width)
    assert shown_pt >= MIN_SHOWN_PT, (
        f"{path.name}: {width} px at {dpi:.0f} dpi is {width / dpi:.1f} in wide; the page shrinks "
        f"it so that {FONT:g} pt text shows at {shown_pt:.1f} pt (< {MIN_SHOWN_PT:g}): draw it "
        f"at most {FONT * CONTENT_PX / (96 * MIN_SHOWN_PT):.1f} in wide"
    )
    assert height >= 2 * MIN_DPI, f"{path.name}: {height} px tall, under 2 in at {MIN_DPI} dpi"
