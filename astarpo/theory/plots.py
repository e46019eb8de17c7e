"""Matplotlib figures of the experiment dicts (Agg canvas, no global backend change).

Each ``plot_<name>(result, path)`` draws the means over seeds with their 95% intervals
(shaded) and writes a PNG; :func:`plot` picks the right one from ``result["experiment"]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["plot", "plot_coverage", "plot_horizon", "plot_samples", "plot_two_beta"]

_TINY = 1e-12


def _figure(n_panels: int, width: float = 4.2, height: float = 3.4) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * n_panels, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, n_panels, squeeze=False)[0]
    return fig, axes


def _band(ax: Any, x: Any, ci: dict[str, Any], label: str, **kw: Any) -> None:
    """Geometric mean over seeds with the 95% interval of the mean log (for log axes)."""
    mean = np.maximum(np.ravel(ci["gmean"]), _TINY)
    lo = np.maximum(np.ravel(ci["glo"]), _TINY)
    hi = np.maximum(np.ravel(ci["ghi"]), _TINY)
    (line,) = ax.plot(x, mean, label=label, **kw)
    ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)


def _save(fig: Any, path: str | Path, title: str, log_note: bool = True) -> Path:
    note = " (log axes: geometric mean, 95% interval of the mean log)" if log_note else ""
    fig.suptitle(title + note, fontsize=10)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    return path


_SCHED = {"constant": "constant c", "inverse_sqrt": "c/sqrt(t)", "inverse": "c/t"}


def plot_horizon(res: dict[str, Any], path: str | Path) -> Path:
    """Suboptimality vs T per schedule (last and average iterate), and A*-PO vs PG by samples."""
    fig, axes = _figure(4)
    steps = res["steps"]
    for ax, (sched, curves) in zip(axes, res["curves"].items(), strict=False):
        for kind in ("last", "average"):
            s = res["slopes"][sched][kind]
            _band(ax, steps, curves[kind], f"{kind} iterate (slope {s['slope']:.2f})")
        ax.set(xscale="log", yscale="log", xlabel="T (OGD rounds)", title=_SCHED[sched])
        ax.axvline(s["x_min"], color="grey", lw=0.5, ls=":")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("J(pi*) - J(pi_T)   (beta2)")
    b = res["baseline"]
    ax = axes[3]
    _band(ax, b["astarpo_samples"], b["astarpo"], "A*-PO (N + t samples)")
    g = res["config"]["pg_group_size"]
    _band(ax, b["pg_samples"], b["pg"], f"PG, group mean, G={g}")
    ax.set(xscale="log", yscale="log", xlabel="samples per context", title="same sample budget")
    ax.legend(fontsize=7)
    return _save(fig, path, f"horizon: {res['n_seeds']} seeds, mean and 95% interval")


def plot_samples(res: dict[str, Any], path: str | Path) -> Path:
    """Final gap vs N (both beta1 settings) and the exact MSE of V̂* vs N."""
    fig, axes = _figure(2)
    ns = res["config"]["n_samples"]
    b2 = res["config"]["beta2"]
    for name, s in res["settings"].items():
        sl = s["slopes"]["final_last"]["slope"]
        _band(axes[0], ns, s["final_last"], f"{name}, beta2={b2} (slope {sl:.2f})", marker="o")
        err = s["value_error"]
        for target, ls in (("vs_beta1", "-"), ("vs_beta2", "--")):
            mse = np.maximum(err[target]["mse"], _TINY)
            axes[1].plot(ns, mse, ls, marker=".", label=f"{name}: MSE {target}")
    axes[0].set(
        xscale="log",
        yscale="log",
        xlabel="N (Stage 1 samples per context)",
        ylabel="final gap J(pi*) - J(pi_T)",
        title="final suboptimality (last iterate)",
    )
    axes[1].set(
        xscale="log",
        yscale="log",
        xlabel="N",
        ylabel="E (V̂* - V*)^2",
        title="exact error of V̂* (binomial)",
    )
    for ax in axes:
        ax.legend(fontsize=7)
    return _save(fig, path, f"samples: {res['n_seeds']} seeds, mean and 95% interval")


def plot_coverage(res: dict[str, Any], path: str | Path) -> Path:
    """Bias of V̂* and final gap (with and without the filter) as v_ref goes to 0."""
    fig, axes = _figure(3)
    r = res["results"]
    v = np.array(res["config"]["v_ref"], dtype=float)
    axes[0].plot(v, np.abs(r["bias_mean"]), "o-", label="|bias|, mean over contexts")
    axes[0].plot(v, np.abs(r["bias_worst"]), "s-", label="|bias|, worst context")
    axes[0].set(ylabel="|E V̂* - V*|", title="bias of V̂* (exact)")
    for ax, key, title in (
        (axes[1], "gap", "final gap, all contexts"),
        (axes[2], "gap_hard", "final gap, contexts with p(x) = v_ref"),
    ):
        _band(
            ax,
            v,
            {k: [c[k][0] for c in r[f"{key}_nofilter"]] for k in ("gmean", "glo", "ghi")},
            "no filter",
            marker="o",
        )
        _band(
            ax,
            v,
            {k: [c[k][0] for c in r[f"{key}_filter"]] for k in ("gmean", "glo", "ghi")},
            "filter (drop all-wrong contexts)",
            marker="s",
        )
        ax.set(yscale="log", title=title, ylabel="J(pi*) - J(pi_T)")
    for ax in axes:
        ax.set_xscale("symlog", linthresh=1e-4)
        ax.set(xlabel="v_ref = min_x p(x)  (symlog: 0 on the left)", xlim=(0, 0.7))
        ax.legend(fontsize=7)
    axes[0].set_yscale("log")
    return _save(fig, path, f"coverage: {res['n_seeds']} seeds, N = {res['config']['n_samples']}")


def plot_two_beta(res: dict[str, Any], path: str | Path) -> Path:
    """Heat maps over (beta1, beta2): KL to pi*_beta2, KL to pi*_beta1, gap under J_beta2."""
    fig, axes = _figure(3, width=4.0, height=3.2)
    b1s, b2s = res["config"]["beta1"], res["config"]["beta2"]
    cells = {(c["beta1"], c["beta2"]): c for c in res["grid"]}
    panels = (
        ("kl_to_opt_beta2", "KL(pi_T || pi*_beta2)"),
        ("kl_to_opt_beta1", "KL(pi_T || pi*_beta1)"),
        ("gap_beta2", "gap under J_beta2"),
    )
    for ax, (key, title) in zip(axes, panels, strict=True):
        m = np.array([[cells[(b1, b2)]["last"][key]["mean"][0] for b1 in b1s] for b2 in b2s])
        img = ax.imshow(np.log10(np.maximum(m, _TINY)), cmap="viridis", aspect="auto")
        for i in range(len(b2s)):
            for j in range(len(b1s)):
                bright = np.log10(max(m[i, j], _TINY)) > np.log10(np.maximum(m, _TINY)).mean()
                ax.text(
                    j,
                    i,
                    f"{m[i, j]:.2g}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="k" if bright else "w",
                )
        ax.set_xticks(range(len(b1s)), [str(b) for b in b1s])
        ax.set_yticks(range(len(b2s)), [str(b) for b in b2s])
        ax.set(xlabel="beta1 (Stage 1)", ylabel="beta2 (Stage 2)", title=title + " (log10 colour)")
        fig.colorbar(img, ax=ax, shrink=0.8)
    c = res["config"]["step_c"]
    return _save(
        fig,
        path,
        f"two-beta: last iterate after T = {res['config']['T']}, "
        f"mean of {res['n_seeds']} seeds; c/sqrt(t) steps, c/beta2^2 with c = {c}",
        log_note=False,
    )


_PLOTS = {
    "horizon": plot_horizon,
    "samples": plot_samples,
    "coverage": plot_coverage,
    "two-beta": plot_two_beta,
}


def plot(res: dict[str, Any], path: str | Path) -> Path:
    """Draw ``res`` (any experiment dict) to ``path`` (a PNG)."""
    return _PLOTS[res["experiment"]](res, path)
