"""The experiments behind docs/theory.md; each module has ``run(...) -> dict`` and ``plot``.

``run(seeds, quick, seed, progress_bar)`` returns a plain dict (config, seeds, package version,
every number plotted and a ``headline`` of the numbers the page quotes), ready for
``json.dump``; ``plot(result, path)`` draws it. Step sizes are given as ``c`` and used as
``c / beta2**2`` (the loss is quadratic in :math:`\\beta_2\\theta`), so one ``c`` suits every
``beta2``.
"""

from __future__ import annotations

from types import ModuleType

from astarpo.theory.experiments import (
    adaptive,
    coverage,
    fisher,
    grid,
    horizon,
    realizability,
    samples,
    small_beta,
    two_beta,
    update,
)

__all__ = ["EXPERIMENTS"]

#: Experiment name (the CLI's) -> module with ``run`` and ``plot``.
EXPERIMENTS: dict[str, ModuleType] = {
    "horizon": horizon,
    "samples": samples,
    "coverage": coverage,
    "two-beta": two_beta,
    "grid": grid,
    "update": update,
    "small-beta": small_beta,
    "realizability": realizability,
    "adaptive": adaptive,
    "fisher": fisher,
}
