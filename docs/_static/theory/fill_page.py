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

HERE = Path(__file__).resolve().parent
NAMES = ["horizon", "samples", "coverage", "two-beta", "grid", "update", "small-beta",
         "realizability", "adaptive", "fisher"]
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
    if isinstance(x, str): return x
    if x == 0: return "0"
    return f"{x:.{d}g}".replace("e-0", "e-").replace("e+0", "e+")
def f2(x): return f"{x:.2f}"
def ci(d, k="slope"): return f"{d[k]:.2f} [{d['lo']:.2f}, {d['hi']:.2f}]"
def gm(c, i=-1): return g(c["gmean"][i])
def gci(c, i=-1): return f"{g(c['gmean'][i])} [{g(c['glo'][i])}, {g(c['ghi'][i])}]"
def near(steps, t): return min(range(len(steps)), key=lambda i: abs(math.log(steps[i] / t)))
def row(fam, v): return next(r for r in C["families"][fam] if r["v_ref"] == v)
def cell(b1, b2): return next(c for c in TB["grid"] if c["beta1"] == b1 and c["beta2"] == b2)
from astarpo.theory.instances import make_instance
from astarpo.theory.experiments.common import INSTANCE
TIES = []
for _v in C["config"]["v_ref"]:
    _p = make_instance("shared", **{**INSTANCE, "v_ref": _v}).solve_rate()
    TIES.append(int((_p <= _p.min()).sum()))
def grid_se():
    import numpy as np
    keep = np.array(G["steps"]) >= G["config"]["fit_t_min"]
    se = [(np.log(np.array(c["ghi"])) - np.log(np.array(c["glo"])))[keep] / (2 * 2.365) for c in G["gap"].values()]
    return float(np.median(np.concatenate(se)))
SE = grid_se()
env = {k: v for k, v in globals().items() if not k.startswith("_")}
text = TMPL.read_text()
def sub(m):
    return str(eval(m.group(1), env))
OUT.write_text(re.sub(r"\{\{(.+?)\}\}", sub, text, flags=re.S))
