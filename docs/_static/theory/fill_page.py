"""Regenerate docs/theory.md from theory.md.tmpl and the committed results of a run.

Every ``{{expr}}`` of the template is evaluated against the experiments' JSON, so no number on
the page is typed by hand. Run from the repository root:

    python docs/_static/theory/fill_page.py [RUN_DIR]

RUN_DIR is the output of ``astarpo theory all --out RUN_DIR`` (``RUN_DIR/<name>/results.json``);
by default the JSON committed here (``docs/_static/theory/<name>.json``, ``summary.json``,
``summary-quick.json``, ``benchmark.txt``) is used.
"""

import json
import math
import re
import sys
from pathlib import Path

from astarpo.theory.baseline import overconfident_gap
from astarpo.theory.claims import claims, counts, grid_se, slope_windows  # noqa: F401 (template)
from astarpo.theory.experiments.common import INSTANCE
from astarpo.theory.instances import make_instance
from astarpo.theory.verdicts import RULES

HERE = Path(__file__).resolve().parent
NAMES = [
    "horizon",
    "samples",
    "coverage",
    "two-beta",
    "grid",
    "update",
    "small-beta",
    "realizability",
    "adaptive",
    "fisher",
]
RUN = Path(sys.argv[1]) if __name__ == "__main__" and len(sys.argv) > 1 else None


def load(name):
    path = RUN / name / "results.json" if RUN else HERE / f"{name}.json"
    return json.loads(path.read_text())


H, S, C, TB, G, U, SB, R, A, F = (load(n) for n in NAMES)
ALL = json.loads(((RUN / "results.json") if RUN else HERE / "summary.json").read_text())
Q = json.loads((HERE / "summary-quick.json").read_text())
BENCH = HERE / "benchmark.txt"
TMPL = HERE / "theory.md.tmpl"
OUT = HERE.parent.parent / "theory.md"
ROWS = claims(dict(zip(NAMES, (H, S, C, TB, G, U, SB, R, A, F), strict=True)))
COUNTS = counts(ROWS)


def claims_table():
    """The claims table: one row per :class:`~astarpo.theory.claims.Claim`."""
    head = "| claim; *source* | measured (experiment: numbers [95% interval]) | verdict (rule) |"
    lines = [head, "|---|---|---|"]
    lines += [f"| {r.claim}; *{r.source}* | {r.measured} | {r.verdict} ({r.rule}) |" for r in ROWS]
    return "\n".join(lines)


def rules_list():
    """The verdict rules, one bullet each."""
    return "\n".join(f"- **{k}**: {v}" for k, v in RULES.items())


def g(x, d=2):
    """``x`` with ``d`` significant digits (strings pass through)."""
    if isinstance(x, str):
        return x
    if x == 0:
        return "0"
    return f"{x:.{d}g}".replace("e-0", "e-").replace("e+0", "e+")


def f2(x):
    """``x`` with two decimals."""
    return f"{x:.2f}"


def ci(d, k="slope"):
    """A fitted slope with its 95% interval."""
    return f"{d[k]:.2f} [{d['lo']:.2f}, {d['hi']:.2f}]"


def gm(c, i=-1):
    """The geometric mean of a ``mean_ci`` dict at index ``i``."""
    return g(c["gmean"][i])


def gci(c, i=-1):
    """The geometric mean and its interval at index ``i``."""
    return f"{g(c['gmean'][i])} [{g(c['glo'][i])}, {g(c['ghi'][i])}]"


def near(steps, t):
    """Index of the evaluation point closest to ``t`` (log scale)."""
    return min(range(len(steps)), key=lambda i: abs(math.log(steps[i] / t)))


def row(fam, v):
    """The coverage row of family ``fam`` at ``v_ref = v``."""
    return next(r for r in C["families"][fam] if r["v_ref"] == v)


def cell(b1, b2):
    """The two-beta cell at ``(beta1, beta2)``."""
    return next(c for c in TB["grid"] if c["beta1"] == b1 and c["beta2"] == b2)


def ties():
    """How many contexts the old tie-based selection ``p <= p.min()`` kept, per v_ref."""
    out = []
    for v in C["config"]["v_ref"]:
        p = make_instance("shared", **{**INSTANCE, "v_ref": v}).solve_rate()
        out.append(int((p <= p.min()).sum()))
    return out


TIES = ties()
GRID_T = sorted({near(G["steps"], t) for t in (10, 100, 1000, G["steps"][-1])})
PG_OVER = overconfident_gap(make_instance("shared", **INSTANCE), H["config"]["beta2"])
SE = grid_se(G)
ENV = {k: v for k, v in globals().items() if not k.startswith("_")}


def render():
    """The page: every ``{{expr}}`` of the template evaluated against the JSON."""
    text = TMPL.read_text()
    return re.sub(r"\{\{(.+?)\}\}", lambda m: str(eval(m.group(1), ENV)), text, flags=re.S)


def main():
    """Fill the template and write docs/theory.md."""
    OUT.write_text(render())


if __name__ == "__main__":
    main()
