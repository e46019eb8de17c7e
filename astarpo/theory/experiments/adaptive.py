r"""``adaptive``: uniform N against an allocation that spends Stage 1 samples where p(x) is low.

Budget-matched: both spend N X reference samples per seed (N = 16). The rule
(:func:`~astarpo.allocation.allocate`) draws 4 per context, then shares the rest in
proportion to :math:`1/(\hat p(x) + 1/4)`, capped at N X / 4 per context. On the coverage
instances (``shared`` and ``tabular``, :math:`v_{ref} \in \{10^{-2}, 10^{-3}\}`): the MSE of
:math:`\hat V^*` against :math:`V^*_{\beta_1}` on the hard contexts and on all (Monte Carlo over
256 Stage 1 draws), and the final gap after T = 2000 steps (8 seeds), overall and on the hard
contexts. :math:`\beta_1 = \beta_2 = 0.1`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from astarpo.analysis.figures import styled
from astarpo.analysis.stats import mean_ci
from astarpo.theory.experiments.common import INSTANCE, config, header, progress
from astarpo.theory.instances import hard_contexts, make_instance, radius_for
from astarpo.theory.stage1 import estimate_values, estimate_values_adaptive
from astarpo.theory.stage2 import run_stage2
from astarpo.theory.streams import STAGE1, generators

SETTINGS = (("shared", 0.01), ("shared", 1e-3), ("tabular", 0.01), ("tabular", 1e-3))


def _mse(v: np.ndarray, truth: np.ndarray, hard: np.ndarray) -> dict[str, float]:
    err = (v - truth) ** 2
    return {"all": float(err.mean()), "hard": float(err[:, hard].mean())}


def _setting(
    fam: str, v_ref: float, n: int, t_max: int, seeds: int, mc: int, seed: int
) -> dict[str, Any]:
    beta = 0.1
    bandit = make_instance(fam, **{**INSTANCE, "v_ref": v_ref})
    hard = hard_contexts(bandit.n_contexts)
    budget = n * bandit.n_contexts
    truth = bandit.optimal_value(beta)[None]
    uni = estimate_values(bandit, n, beta, generators(STAGE1, seed, mc, tag=1))[0]
    ada, counts = estimate_values_adaptive(
        bandit, budget, 4, beta, generators(STAGE1, seed, mc, tag=2)
    )
    cfg = config(beta, t_max, radius=radius_for(bandit, beta), track_fisher=bandit.dim <= 64)
    out = run_stage2(bandit, np.concatenate([uni[:seeds], ada[:seeds]]), cfg, seed=seed)
    row: dict[str, Any] = {
        "family": fam,
        "v_ref": v_ref,
        "mean_counts_hard": float(counts[:, hard].mean()),
        "mean_counts_other": float(np.delete(counts, hard, 1).mean()),
        "mse": {"uniform": _mse(uni, truth, hard), "adaptive": _mse(ada, truth, hard)},
    }
    for i, name in enumerate(("uniform", "adaptive")):
        sl = slice(i * seeds, (i + 1) * seeds)
        row[f"gap_{name}"] = mean_ci(out.last[sl, -1:])
        row[f"gap_hard_{name}"] = mean_ci(out.context_last[sl, -1][:, hard].mean(-1, keepdims=True))
    return row


def run(seeds: int = 8, quick: bool = False, seed: int = 0, progress_bar: bool = False) -> dict:
    """Run the experiment (see the module docstring).

    Args:
        seeds: Number of seeds S (a batch axis of the parameters).
        quick: The small version (seconds; used by the tests).
        seed: Base seed of every random stream.
        progress_bar: Show a tqdm bar over the experiment's settings.

    Returns:
        A JSON-ready dict: the header (config, seeds, version), every number plotted, and
        ``headline``, the numbers docs/theory.md quotes.
    """
    n, t_max, mc = 16, (150 if quick else 2000), (64 if quick else 256)
    settings = SETTINGS[::2] if quick else SETTINGS
    res = header(
        "adaptive",
        seeds,
        seed,
        quick,
        {
            "settings": [list(s) for s in settings],
            "n_samples": n,
            "budget": "N * X per seed",
            "n_first": 4,
            "T": t_max,
            "beta1": 0.1,
            "beta2": 0.1,
            "stage1_monte_carlo": mc,
        },
        instance={**INSTANCE, "v_ref": "per setting"},
    )
    res["rows"] = [
        _setting(f, v, n, t_max, seeds, mc, seed)
        for f, v in progress(settings, "adaptive", progress_bar)
    ]
    res["headline"] = {
        f"{r['family']},{r['v_ref']}": {
            "mse_hard_uniform": r["mse"]["uniform"]["hard"],
            "mse_hard_adaptive": r["mse"]["adaptive"]["hard"],
            "gap_uniform": r["gap_uniform"]["gmean"][0],
            "gap_adaptive": r["gap_adaptive"]["gmean"][0],
            "gap_hard_uniform": r["gap_hard_uniform"]["gmean"][0],
            "gap_hard_adaptive": r["gap_hard_adaptive"]["gmean"][0],
        }
        for r in res["rows"]
    }
    return res


@styled
def plot(res: dict[str, Any], path: str | Path) -> Path:
    """MSE of V̂* on the hard contexts and the final gaps, uniform vs adaptive, per setting.

    Dots with 95% error bars on log axes (no bars: a log bar's length depends on where its
    axis is cut).

    Args:
        res: The dict returned by ``run``.
        path: Where to write the PNG.

    Returns:
        ``path``.
    """
    from astarpo.analysis.figures import errorbars, figure, legend_below, save

    fig, axes = figure(3, 1, height=3.6)
    rows = res["rows"]
    y = np.arange(len(rows))
    labels = [f"{r['family']}, {r['v_ref']:g}" for r in rows]
    for k, (name, off) in enumerate((("uniform", -0.15), ("adaptive", 0.15))):
        axes[0].plot(
            [r["mse"][name]["hard"] for r in rows], y + off, "o", color=f"C{k}", label=name
        )
        for ax, key in ((axes[1], "gap"), (axes[2], "gap_hard")):
            ci = [r[f"{key}_{name}"] for r in rows]
            g = [c["gmean"][0] for c in ci]
            lo, hi = [c["glo"][0] for c in ci], [c["ghi"][0] for c in ci]
            errorbars(ax, g, y + off, lo, hi, horizontal=True, color=f"C{k}")
    titles = (r"MSE of $\hat V^*$, hard", "gap, all contexts", "gap, hard contexts")
    for ax, title in zip(axes, titles, strict=True):
        ax.set_yticks(y, labels if ax is axes[0] else [""] * len(y))
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.set(xscale="linear" if ax is axes[0] else "log", title=title)
        ax.margins(x=0.2)
    handles, labs = axes[0].get_legend_handles_labels()
    legend_below(fig, handles, labs, 2)
    return save(
        fig,
        path,
        f"adaptive: {res['config']['n_samples']} X samples per seed, 95% intervals",
        strict=True,
    )
