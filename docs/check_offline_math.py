"""Check that built HTML pages render their formulas with no network (MathJax served locally).

Usage: ``python docs/check_offline_math.py PAGE.html [PAGE.html ...]`` (``make docs`` runs it on
the built theory page). Each page is opened in headless Chromium with every host name made
unresolvable, so a formula can only render if MathJax comes from the built site. A page passes
when MathJax produced ``mjx-container`` elements and no raw ``\\(`` or ``\\[`` delimiter is left
in its text. Without Chromium the check is skipped with a message (exit 0).
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--host-resolver-rules=MAP * ~NOTFOUND",  # no host resolves: a CDN would fail to load
    "--virtual-time-budget=20000",  # let MathJax finish typesetting before the DOM is dumped
]


def find_chromium() -> str | None:
    """The first Chromium-like browser on ``PATH``, or ``None``."""
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def rendered_dom(page: Path, chromium: str) -> str:
    """The page's DOM after scripts ran, as Chromium serializes it."""
    with tempfile.TemporaryDirectory() as profile:
        out = subprocess.run(
            [chromium, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
    if out.returncode != 0:
        raise RuntimeError(f"chromium failed on {page}: {out.stderr[-2000:]}")
    return out.stdout


def problems(dom: str) -> list[str]:
    """What is wrong with a rendered DOM (empty when the formulas rendered)."""
    found = []
    body = re.sub(r"<(script|style)\b.*?</\1>", "", dom, flags=re.S | re.I)
    text = html.unescape(re.sub(r"<[^>]+>", " ", body))
    if "<mjx-container" not in dom:
        found.append("no mjx-container: MathJax did not typeset the page")
    raw = [m.start() for m in re.finditer(r"\\\(|\\\[", text)]
    if raw:
        found.append(f"{len(raw)} raw math delimiters left, first: {text[raw[0] : raw[0] + 60]!r}")
    return found


def main(argv: list[str]) -> int:
    chromium = find_chromium()
    if chromium is None:
        print("check_offline_math: skipped (no chromium on PATH; apt-get install chromium)")
        return 0
    failed = False
    for arg in argv:
        bad = problems(rendered_dom(Path(arg), chromium))
        print(f"check_offline_math: {arg}: {'; '.join(bad) if bad else 'formulas rendered'}")
        failed |= bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
