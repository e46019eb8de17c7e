"""The studies by name (:data:`STUDIES`). Adding a study is one subpackage (a config dataclass,
``run.run`` and ``report``'s ``refresh`` and ``write``) and one entry here: its config class and
a typed loader of its code (imported only when the study runs, so that listing the studies
loads no torch)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from experiments.adaptive_n import config as adaptive_n
from experiments.adaptive_n.config import AdaptiveNConfig
from experiments.efficiency import config as efficiency
from experiments.efficiency.config import EfficiencyConfig
from experiments.harness.config import StudyConfig
from experiments.harness.ladder_sets import LadderConfig
from experiments.harness.output import OutputDir
from experiments.ladder import config as ladder
from experiments.ladder_train import config as ladder_train
from experiments.ladder_train.config import LadderTrainConfig
from experiments.refresh import config as refresh
from experiments.refresh.config import RefreshConfig
from experiments.two_beta import config as two_beta
from experiments.two_beta.config import TwoBetaConfig
from experiments.zero_pass import config as zero_pass
from experiments.zero_pass.config import ZeroPassConfig

__all__ = ["STUDIES", "Study", "StudyCode"]

C = TypeVar("C", bound=StudyConfig)
C_contra = TypeVar("C_contra", bound=StudyConfig, contravariant=True)


class RunFunction(Protocol[C_contra]):
    """A study's ``run.run``: runs the study of a config into ``out_dir``."""

    def __call__(
        self,
        cfg: C_contra,
        out_dir: str | Path,
        *,
        overwrite: bool = ...,
        progress: bool = ...,
        resume: bool = ...,
    ) -> dict[str, Any]: ...


class StudyCode(NamedTuple, Generic[C]):
    """A study's code: ``run`` (``run.run``), ``refresh`` (``report.refresh``: the summary
    made again from the runs) and ``write`` (``report.write(output, result, with_json)``)."""

    run: RunFunction[C]
    refresh: Callable[[dict[str, Any]], dict[str, Any]]
    write: Callable[..., None]


@dataclass(frozen=True)
class Study(Generic[C]):
    """One study.

    Args:
        package: Its subpackage (``python -m PACKAGE``).
        config: Its config class (one flag per setting).
        code: Imports and returns its code (:class:`StudyCode`), typed by its config.
        stem: The stem of its output files (``stem.json``, ``stem.md``, ``stem.png``).
        summary: One line on what it measures.
        presets: ``presets(given settings, quick) -> settings``: what ``--quick`` (or a given
            setting such as ``task``) selects, under the given settings.
        section: The section of a sectioned ``--config`` file it reads.
    """

    package: str
    config: type[C]
    code: Callable[[], StudyCode[C]]
    stem: str
    summary: str
    presets: Callable[[Mapping[str, Any], bool], dict[str, Any]]
    section: str = "study"

    def run(self, config: C, out_dir: str | Path, **kwargs: Any) -> dict[str, Any]:
        """Run the study: ``run.run(config, out_dir, **kwargs)``."""
        return self.code().run(config, out_dir, **kwargs)

    def rerender(self, output: OutputDir) -> None:
        """Write ``stem.md`` and ``stem.png`` again from ``output``'s ``stem.json`` (its summary
        refreshed; the JSON itself is not rewritten)."""
        code = self.code()
        path = output.path / f"{self.stem}.json"
        try:
            result = json.loads(path.read_text())
        except FileNotFoundError:
            raise ValueError(f"--report-only: no {path}; run the study first.") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"--report-only: {path} is not JSON ({e}).") from None
        code.write(output, code.refresh(result), with_json=False)


def _efficiency() -> StudyCode[EfficiencyConfig]:
    from experiments.efficiency import report, run

    return StudyCode(run.run, report.refresh, report.write)


def _zero_pass() -> StudyCode[ZeroPassConfig]:
    from experiments.zero_pass import report, run

    return StudyCode(run.run, report.refresh, report.write)


def _two_beta() -> StudyCode[TwoBetaConfig]:
    from experiments.two_beta import report, run

    return StudyCode(run.run, report.refresh, report.write)


def _ladder() -> StudyCode[LadderConfig]:
    from experiments.ladder import report, run

    return StudyCode(run.run, report.refresh, report.write)


def _adaptive_n() -> StudyCode[AdaptiveNConfig]:
    from experiments.adaptive_n import report, run

    return StudyCode(run.run, report.refresh, report.write)


def _refresh() -> StudyCode[RefreshConfig]:
    from experiments.refresh import report, run

    return StudyCode(run.run, report.refresh, report.write)


def _ladder_train() -> StudyCode[LadderTrainConfig]:
    from experiments.ladder_train import report, run

    return StudyCode(run.run, report.refresh, report.write)


#: Study name (``python -m experiments.NAME``) -> :class:`Study`.
STUDIES: dict[str, Study[Any]] = {
    "efficiency": Study(
        "experiments.efficiency",
        EfficiencyConfig,
        _efficiency,
        "bench",
        "A*-PO against GRPO/RLOO/PPO/REBEL (and TRL's trainers) on one wall-clock budget, or "
        "for equal steps (--protocol paper): time to accuracy targets, total time, peak memory, "
        "final accuracy",
        efficiency.presets,
        section="bench",
    ),
    "zero-pass": Study(
        "experiments.zero_pass",
        ZeroPassConfig,
        _zero_pass,
        "zero_pass",
        "prompts the reference never solves (pass@64 = 0): does A*-PO, or an exploring "
        "baseline, learn them",
        zero_pass.presets,
    ),
    "two-beta": Study(
        "experiments.two_beta",
        TwoBetaConfig,
        _two_beta,
        "two_beta",
        "A*-PO with V* at each beta1 (beta2 = 1e-3, equal steps): final accuracy, KL, steps "
        "to target and gradient noise, paired against the paper's beta1 = 0.5",
        two_beta.presets,
    ),
    "ladder": Study(
        "experiments.ladder",
        LadderConfig,
        _ladder,
        "ladder",
        "prompt sets binned by the reference's exact solve probability v_ref (teacher-forced), "
        "with their sampled pass@8 = 0 and pass@64 = 0 fractions",
        ladder.presets,
    ),
    "adaptive-n": Study(
        "experiments.adaptive_n",
        AdaptiveNConfig,
        _adaptive_n,
        "adaptive_n",
        "Stage 1's V* error against the exact value on the ladder (bias, MSE), fixed N against "
        "the adaptive allocation at equal samples, paired by prompt",
        adaptive_n.presets,
    ),
    "refresh": Study(
        "experiments.refresh",
        RefreshConfig,
        _refresh,
        "refresh",
        "A*-PO with a fixed reference against one refreshed every K steps, on the ladder's "
        "bins near the threshold: exact held-out pass@k per bin, KL to the original reference, "
        "Stage 1 samples spent",
        refresh.presets,
    ),
    "ladder-train": Study(
        "experiments.ladder_train",
        LadderTrainConfig,
        _ladder_train,
        "ladder_train",
        "who learns, per bin of log10 v_ref: A*-PO and GRPO on every ladder bin alone, the "
        "all-wrong filter, PPO and REBEL near the threshold, alone and mixed with easy prompts, "
        "for equal steps: held-out gain, successes sampled, the v_ref where each stops learning",
        ladder_train.presets,
    ),
}
