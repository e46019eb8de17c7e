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

import numpy as np

from astarpo.theory.experiments.common import INSTANCE
from astarpo.theory.instances import make_instance

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
RUN = Path(sys.argv[1]) if len(sys.argv) > 1 else None


def load(name):
    path = RUN / name / "results.json" if RUN else HERE / f"{name}.json"
    return json.loads(path.read_text())


H, S, C, TB, G, U, SB, R, A, F = (load(n) for n in NAMES)
ALL = json.loads(((RUN / "results.json") if RUN else HERE / "summary.json").read_text())
Q = json.loads((HERE / "summary-quick.json").read_text())
BENCH = HERE / "benchmark.txt"
TMPL = HERE / "theory.md.tmpl"
OUT = HERE.parent.parent / "theory.md"


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


def grid_se():
    """Median standard error of a grid cell's mean log gap over the fitted cells."""
    keep = np.array(G["steps"]) >= G["config"]["fit_t_min"]
    se = [
        (np.log(np.array(c["ghi"])) - np.log(np.array(c["glo"])))[keep] / (2 * 2.365)
        for c in G["gap"].values()
    ]
    return float(np.median(np.concatenate(se)))


TIES = ties()
SE = grid_se()
ENV = {k: v for k, v in globals().items() if not k.startswith("_")}


def main():
    """Fill the template and write docs/theory.md."""
    text = TMPL.read_text()
    OUT.write_text(re.sub(r"\{\{(.+?)\}\}", lambda m: str(eval(m.group(1), ENV)), text, flags=re.S))


if __name__ == "__main__":
    main()
