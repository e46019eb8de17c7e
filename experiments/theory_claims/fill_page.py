"""Regenerate docs/theory.md from theory.md.tmpl and the committed results of a run.

Every ``{{expr}}`` of the template is evaluated against the experiments' JSON, so no number on
the page is typed by hand. Run from the repository root:

    python -m experiments.theory_claims.fill_page [RUN_DIR]

RUN_DIR is the output of ``astarpo theory all --out RUN_DIR`` (``RUN_DIR/<name>/results.json``);
by default the JSON committed here (``docs/_static/theory/<name>.json``, ``summary.json``,
``summary-quick.json``, ``benchmark.txt``) is used.
"""

import json
import math
import re
import sys
from pathlib import Path

from astarpo.theory import (  # noqa: F401 (FIXED_POINT_RULE, CHECKABLE: the template's)
    CHECKABLE,
    EXPERIMENTS,
    FIXED_POINT_RULE,
    VALUE_LABEL,
    hard_contexts,
    make_instance,
    overconfident_gap,
)
from experiments.theory_claims.claims import claims, grid_se, slope_windows  # noqa: F401 (template)
from experiments.theory_claims.claims_update import (  # noqa: F401 (template)
    RULE_LABEL,
    START_LABEL,
    variance_check,
)
from experiments.theory_claims.tally import by_source, counts_by_source
from experiments.theory_claims.verdicts import RULES, near_optimum, order

#: The committed results and the page template (docs/_static/theory).
HERE = Path(__file__).resolve().parents[2] / "docs" / "_static" / "theory"
NAMES = list(EXPERIMENTS)
RUN = Path(sys.argv[1]) if __name__ == "__main__" and len(sys.argv) > 1 else None


def load(name):
    path = RUN / name / "results.json" if RUN else HERE / f"{name}.json"
    return json.loads(path.read_text())


H, S, C, TB, G, U, SB, R, A, F = (load(n) for n in NAMES)
P = U["paper_betas"]
ALL = json.loads(((RUN / "results.json") if RUN else HERE / "summary.json").read_text())
Q = json.loads((HERE / "summary-quick.json").read_text())
BENCH = HERE / "benchmark.txt"
UPDATE_RUN = HERE / "update-run.txt"
TMPL = HERE / "theory.md.tmpl"
OUT = HERE.parent.parent / "theory.md"
ROWS = claims(dict(zip(NAMES, (H, S, C, TB, G, U, SB, R, A, F), strict=True)))
#: The instance every experiment runs on (as the horizon experiment recorded it).
INSTANCE = H["config"]["instance"]


def claims_table():
    """The claims table: one row per :class:`~experiments.theory_claims.claims.Claim`, grouped by
    source."""
    head = (
        "| source | claim (*who said it*) | measured (experiment: numbers [95% interval]) "
        "| verdict (rule) |"
    )
    lines = [head, "|---|---|---|---|"]
    for r in by_source(ROWS):
        who = f" (*{r.said_by}*)" if r.said_by else ""
        lines.append(f"| {r.source} | {r.claim}{who} | {r.measured} | {r.verdict} ({r.rule}) |")
    return "\n".join(lines)


def tally():
    """One line per source: the verdicts counted as evidence, and those not counted."""
    out = []
    for src, c in counts_by_source(ROWS).items():
        n = sum(c.values())
        out.append(
            f"- **{src}** ({n} claims): counted as evidence {c['agrees']} agree, "
            f"{c['disagrees']} disagree, {c['partly']} partly, {c['inconclusive']} inconclusive; "
            f"not counted {c['identity check']} identity checks, {c['not testable']} not testable."
        )
    return "\n".join(out)


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


def tri(c, i=0):
    """(mean, lo, hi) of a ``mean_ci`` dict at index ``i`` (arithmetic)."""
    return c["mean"][i], c["lo"][i], c["hi"][i]


def interval_of(c, i=0):
    """The arithmetic mean and its 95% interval at index ``i``."""
    m, lo, hi = tri(c, i)
    return f"{g(m)} [{g(lo)}, {g(hi)}]"


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


def pch(rule, var, start, val):
    """The fixed-point rule's result for one run of the paper-betas setting."""
    return P["runs"][rule][var][start][val]["change"]


def pkl(rule, var, start, val):
    """KL of that run's last-window average [bootstrap 95%]."""
    k, lo, hi = pch(rule, var, start, val)["kl_after"]
    return f"{g(k, 3)} [{g(lo, 3)}, {g(hi, 3)}]"


def pstate(rule, var, start, val):
    """The start's state, with its change [95%] (none at the optimum)."""
    c = pch(rule, var, start, val)
    if c["change"] is None:
        return c["state"]
    return f"{c['state']}: {c['change']:+.2f} [{c['lo']:+.2f}, {c['hi']:+.2f}]"


def pverdict(rule, var, val):
    """The setting's verdict word."""
    return P["verdicts"][rule][var][val]["word"]


def last(rule, start, val, key, path="variance_path"):
    """The value of a path quantity at the last evaluation point."""
    return P[path][rule][start][val][key][-1]


R1, R2 = "constant, c=0.01", "constant, c=0.001"


def update_run():
    """Wall clock, CPU share and the 1-minute load averages of the committed update run."""
    text = UPDATE_RUN.read_text()
    wall_match = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", text)
    cpu_match = re.search(r"Percent of CPU this job got: (\d+)%", text)
    assert wall_match and cpu_match, f"{UPDATE_RUN} is not a /usr/bin/time -v report"
    wall, cpu = wall_match.group(1), cpu_match.group(1)
    loads = [float(m) for m in re.findall(r"^[\w:]+: ([\d.]+),", text, flags=re.M)]
    return (
        f"{wall} wall clock (m:ss) for the whole `update`, {cpu}% of one core; the 1-minute load "
        f"average read every minute ran from {min(loads):.1f} to {max(loads):.1f} (mean "
        f"{sum(loads) / len(loads):.1f}) on the 2 cores, this run and other jobs together"
    )


def kl(rule, var, start, val, which="kl_after", d=2):
    """The KL of a window average of one run (``kl_after``: the last window)."""
    return g(pch(rule, var, start, val)[which][0], d)


def gap_of(rule, var, start, val):
    """The gap under J_{1e-3} of the last window's average (beta2 times its KL)."""
    return g(P["config"]["beta2"] * pch(rule, var, start, val)["kl_after"][0])


def noise_ratio(rule, start, val):
    """At T: the plain gradient's noise with this V-hat over its noise with V* (same iterate)."""
    return g(last(rule, start, val, "noise") / last(rule, start, val, "noise_if_exact_v"))


def share(rule, start, val, key, d=2):
    """A premise-path share at T: geometric mean over seeds [95%]."""
    c = last(rule, start, val, key, "premise_path")
    return f"{g(c['gmean'], d)} [{g(c['glo'], d)}, {g(c['ghi'], d)}]"


def st(rule, var, start, val):
    """The state of one start by the fixed-point rule."""
    return pch(rule, var, start, val)["state"]


def apart(a, b):
    """Whether two runs' last-window KL intervals overlap, in words (the order rule)."""
    o = order(tuple(pch(*a)["kl_after"]), tuple(pch(*b)["kl_after"]))
    return "intervals overlapping" if o == "overlap" else "intervals apart"


def near_runs(val):
    """The scripts' runs (step rule, start) with this V-hat that end within 0.05 nats of pi*."""
    return [
        (rule, start)
        for rule in P["config"]["step_rules"]
        for start in START_LABEL
        if near_optimum(tuple(pch(rule, "scripts", start, val)["kl_after"]))
    ]


def paper_rows():
    """The table of the paper-betas setting: one row per step rule, update and value estimate."""
    out = []
    for rule in P["config"]["step_rules"]:
        for var in P["config"]["variants"]:
            for val in P["config"]["values"]:
                cells = [RULE_LABEL[rule], var, VALUE_LABEL[val]]
                for start in START_LABEL:
                    cells += [pkl(rule, var, start, val), pstate(rule, var, start, val)]
                cells.append(f"**{pverdict(rule, var, val)}**")
                out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def zm(beta, inst):
    """The zero-mass row of instance ``inst`` ("transfer", "no_transfer") at ``beta`` ("0.05")."""
    return C["zero_mass"]["by_beta"][beta]["instances"][inst]


def cl(c, lo=0.0, hi=None, d=2):
    """Arithmetic mean [95%] of a ``mean_ci`` dict, the interval clipped to ``[lo, hi]``."""
    m, a, b = tri(c)
    a, b = max(a, lo), (b if hi is None else min(b, hi))
    return f"{g(m, d)} [{g(a, d)}, {g(b, d)}]"


ZM_LABEL = {
    "estimated": "A*-PO, V-hat*",
    "exact": "A*-PO, exact V*",
    "filter": "A*-PO, filter",
    "pg": "PG (G = 4)",
}


def zm_rows():
    """The zero-mass table: one row per beta, instance and method."""
    out = []
    for beta in C["zero_mass"]["by_beta"]:
        for inst in ("transfer", "no_transfer"):
            row = zm(beta, inst)
            for m, d in row["methods"].items():
                out.append(
                    f"| {beta} | {inst.replace('_', ' ')} | {g(row['reference_gap_hard'], 3)} "
                    f"| {ZM_LABEL[m]} | {g(d['c'])} | {cl(d['gap_hard'])} "
                    f"| {cl(d['gap_hard_on_ray']) if inst == 'transfer' else '-'} "
                    f"| {cl(d['correct_mass_hard'], 0.0, 1.0)} "
                    f"| {d['verdict']} |"
                )
    return "\n".join(out)


def zm_by_c():
    """Hard-context gap at every c of the grid, per method, on the transfer instance."""
    out = []
    for beta in C["zero_mass"]["by_beta"]:
        ms = zm(beta, "transfer")["methods"]
        for c in C["zero_mass"]["by_beta"][beta]["tune_c"]:
            cells = [cl(ms[m]["hard_by_c"][str(c)]) for m in ZM_LABEL]
            out.append(f"| {beta} | {g(c)} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def zm_fisher():
    """Smallest eigenvalue of the solvable contexts' mean Fisher matrix at the reference
    (transfer instance of the zero-mass runs)."""
    import numpy as np

    b = make_instance("shared", **{**INSTANCE, "v_ref": C["zero_mass"]["epsilon"]})
    keep = np.setdiff1d(np.arange(b.n_contexts), hard_contexts(b.n_contexts))
    p, f = b.ref_probs[keep], b.features[keep]
    d = f - (p[..., None] * f).sum(1, keepdims=True)
    return float(np.linalg.eigvalsh(np.einsum("xy,xyi,xyj->ij", p, d, d) / len(keep)).min())


def zm_mean(beta, method, c):
    """Mean final hard gap of ``method`` at step constant ``c``, transfer instance."""
    return zm(beta, "transfer")["methods"][method]["hard_by_c"][str(c)]["mean"][0]


def zm_moved(beta, a="estimated", b="exact"):
    """The c where ``a`` or ``b`` ends below 99% of the reference's hard gap (transfer)."""
    ref = zm(beta, "transfer")["reference_gap_hard"]
    return [
        c
        for c in C["zero_mass"]["by_beta"][beta]["tune_c"]
        if min(zm_mean(beta, a, c), zm_mean(beta, b, c)) < 0.99 * ref
    ]


def ray_at(beta, s):
    """The transfer instance's segment (JSON ``ray``) at the grid point nearest to ``s``."""
    path = zm(beta, "transfer")["ray"]
    i = min(range(len(path["s"])), key=lambda k: abs(path["s"][k] - s))
    return {k: v[i] for k, v in path.items()}


def overlap(a, b):
    """Whether the 95% intervals of two ``mean_ci`` dicts overlap (arithmetic, unclipped)."""
    return a["lo"][0] <= b["hi"][0] and b["lo"][0] <= a["hi"][0]


def zm_separated(beta, a="estimated", b="exact"):
    """The c (of that beta's grid) where methods ``a`` and ``b`` have disjoint hard-gap intervals
    on the transfer instance, each as "c (lower method)"."""
    ms = zm(beta, "transfer")["methods"]
    out = []
    for c in C["zero_mass"]["by_beta"][beta]["tune_c"]:
        x, y = ms[a]["hard_by_c"][str(c)], ms[b]["hard_by_c"][str(c)]
        if not overlap(x, y):
            out.append(f"{g(c)} ({ZM_LABEL[a] if x['mean'][0] < y['mean'][0] else ZM_LABEL[b]})")
    return out


TIES = ties()
ZM_FISHER = zm_fisher()
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
