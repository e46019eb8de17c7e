"""The math-verify scoring run inside the worker processes of
:class:`~astarpo.llm.rewards.math_verify.MathVerifyReward`.

Imported only in worker processes: it loads math-verify (and sympy) at import time so that the
cost is paid once, when the worker starts, and disables math-verify's own ``signal.alarm``
timeouts (the pool enforces the deadline by killing the worker). The pool's forkserver
imports it once; workers forked from it start warm.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

logging.getLogger("math_verify").setLevel(logging.ERROR)

_PRED_CONFIG = (LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig())
_GOLD_CONFIG = (LatexExtractionConfig(), ExprExtractionConfig())
_DOLLAR = re.compile(r"(?<!\\)\$")  # a math delimiter, not an escaped dollar sign


def gold_text(answer: str) -> str:
    """The gold answer as math-verify should read it: bare answers are wrapped in ``$...$``.

    A gold that already has math delimiters (an unescaped ``$``, ``\\(``, ``\\[``) or a
    ``\\boxed`` is kept; ``\\$36`` (an escaped dollar sign) counts as bare.
    """
    text = answer.strip()
    if _DOLLAR.search(text) or "\\boxed" in text or "\\(" in text or "\\[" in text:
        return text
    return f"${text}$"


def score(item: dict[str, Any]) -> dict[str, Any]:
    """Score one completion against its gold answer.

    Args:
        item: ``{"completion": str, "gold": str}`` plus optional ``float_rounding``,
            ``numeric_precision`` and ``strict`` passed to ``math_verify.verify``.

    Returns:
        ``{"score": 1.0 or 0.0}``, or ``{"reason": "unparsable"}`` when no answer could be
        extracted from the completion, or ``{"reason": "unparsable_gold"}`` for the gold answer.
    """
    gold = parse(gold_text(str(item["gold"])), extraction_config=_GOLD_CONFIG, parsing_timeout=None)
    if not gold:
        return {"reason": "unparsable_gold"}
    pred = parse(str(item["completion"]), extraction_config=_PRED_CONFIG, parsing_timeout=None)
    if not pred:
        return {"reason": "unparsable"}
    ok = verify(
        gold,
        pred,
        float_rounding=int(item.get("float_rounding", 6)),
        numeric_precision=int(item.get("numeric_precision", 15)),
        strict=bool(item.get("strict", True)),
        timeout_seconds=None,
    )
    return {"score": 1.0 if ok else 0.0}


# Warm-up: the first parse/verify builds grammars and caches (about a second); pay it while the
# worker starts, not inside the first item's deadline.
score({"completion": "\\boxed{\\frac{1}{2}}", "gold": "0.5"})
