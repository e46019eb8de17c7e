"""docs/two_beta.md shows what the committed run says: its tables and verdicts are the report of
docs/figures/two_beta.json, made again here from the runs by the study's own rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.two_beta.report import refresh, to_markdown

pytestmark = pytest.mark.pages

DOCS = Path(__file__).resolve().parents[3] / "docs"


def test_the_page_is_the_report_of_the_committed_run() -> None:
    result = json.loads((DOCS / "figures" / "two_beta.json").read_text())
    again = refresh(result)  # the summary made again from the runs: the rule, not a copy
    assert again["summary"]["by_rate"].keys() == result["summary"]["by_rate"].keys()
    for lr, block in again["summary"]["by_rate"].items():
        assert block["verdict"] == result["summary"]["by_rate"][lr]["verdict"]
    page = (DOCS / "two_beta.md").read_text()
    wanted = [
        line
        for line in to_markdown(again).splitlines()
        if line.startswith("|") or line.startswith("Accuracy:")
    ]
    assert wanted and [line for line in wanted if line not in page] == []
    assert "![" in page and "figures/two_beta.png" in page
