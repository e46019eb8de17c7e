r"""``Stage1Config``: the settings of Stage 1 (N reference samples per prompt, then V*).

:func:`~astarpo.llm.stage1.estimate.estimate_values` takes one, and ``astarpo value`` makes one
flag per field (``--n-samples``, ``--beta1``, ...; ``progress`` is ``--no-progress``). Like the
training configs (:mod:`astarpo.llm.algorithms.train_config`), it is frozen and validated on
construction: a bad value raises ``ValueError`` naming the field and what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from astarpo.config import doc_field
from astarpo.llm.rollout.base import SamplingConfig
from astarpo.objective import check_beta

__all__ = ["Stage1Config", "training_stage1_config"]


@dataclass(frozen=True)
class Stage1Config:
    r"""The settings of Stage 1, which estimates for every prompt (paper Eq. 3)

    .. math:: \hat V^*(x) = \beta_1 \log \frac1N \sum_{i=1}^N e^{r(x, y_i)/\beta_1}

    from ``n_samples`` reference responses (each field's help says what it does);
    with ``allocation="adaptive"`` the number of responses differs by prompt (``n_samples`` is
    then the most their mean reaches over each generate call's prompts, :mod:`astarpo.allocation`).
    ``n_samples``, ``beta1``, the sampling fields, ``seed``, ``prompts_per_call`` and the
    allocation (rule, pilot, cap) are recorded in every row's provenance: a resumed run or a
    merge must use the same values, and training refuses a table sampled with another token
    budget or temperature than its own.

    Example:
        >>> from astarpo.llm import Stage1Config
        >>> Stage1Config(n_samples=8, beta1=0.5).sampling.max_new_tokens
        256
    """

    n_samples: int = doc_field(8, "N, reference responses sampled per prompt (the paper: 8).")
    beta1: float = doc_field(
        0.5,
        "KL strength of V* = beta1 log mean exp(r / beta1), > 0 (the paper: 0.5): small beta1 "
        "moves V* towards the best of the N rewards, large beta1 towards their mean.",
    )
    max_new_tokens: int = doc_field(
        SamplingConfig.max_new_tokens,  # training's default too: tables must match it
        "Most generated tokens per response (EOS included); training refuses a table sampled "
        "with another budget than its own max_new_tokens.",
    )
    temperature: float = doc_field(
        1.0, "Sampling temperature (0 = greedy, allowed only with n_samples 1)."
    )
    top_p: float = doc_field(1.0, "Nucleus-sampling mass in (0, 1]; 1 = off.")
    seed: int = doc_field(
        0,
        "Base seed; each batch's seed is derived from it and the batch's prompt keys, so a "
        "resumed run samples what an uninterrupted one would.",
    )
    prompts_per_call: int = doc_field(
        8,
        "Prompts per generate call (prompts_per_call x n_samples responses); keep it when "
        "resuming. Not the batch_size of training, which counts prompts per step.",
    )
    allocation: str = doc_field(
        "fixed",
        "How samples are spread over prompts: 'fixed' (n_samples each, the paper) or "
        "'adaptive' (pilot_samples each, then the rest of each call's n_samples x prompts "
        "budget where the pilot found few successes, at most max_samples per prompt; the rule "
        "of astarpo.allocation.allocate).",
        choices=("fixed", "adaptive"),
    )
    pilot_samples: int = doc_field(
        4,
        "With allocation 'adaptive': samples per prompt of the pilot round, <= n_samples. "
        "Ignored with 'fixed'.",
    )
    max_samples: int = doc_field(
        32,
        "With allocation 'adaptive': most samples of one prompt, >= n_samples. Ignored with "
        "'fixed'.",
    )
    reward_timeout: float = doc_field(
        600.0,
        "Deadline in seconds of one call of a custom reward function on a batch; a call past it "
        "stops the run with an error naming the function. 0 = none.",
    )
    filter_all_wrong: bool = doc_field(
        False,
        "Leave the all-wrong prompts (pass rate 0) out of the returned table (and of an export); "
        "the table file keeps them. The paper keeps them. Every prompt all wrong is an error (no "
        "empty table).",
    )
    progress: bool = doc_field(
        True, "Show a tqdm progress bar (off a terminal it refreshes every 30 s)."
    )

    def __post_init__(self) -> None:
        ints = ("n_samples", "prompts_per_call", "max_new_tokens", "seed", "pilot_samples")
        for name in (*ints, "max_samples"):
            v, low = getattr(self, name), 0 if name == "seed" else 1
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {v!r}.")
        check_beta(self.beta1, "beta1")  # the objective's own check
        for name in ("reward_timeout", "temperature"):
            x = getattr(self, name)
            ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            if not ok or x < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {x!r}.")
        for name in ("filter_all_wrong", "progress"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}.")
        if self.allocation not in ("fixed", "adaptive"):
            raise ValueError(f"allocation must be 'fixed' or 'adaptive', got {self.allocation!r}.")
        adaptive = self.allocation == "adaptive"
        if adaptive and not self.pilot_samples <= self.n_samples <= self.max_samples:
            raise ValueError(
                f"allocation 'adaptive' needs pilot_samples <= n_samples <= max_samples (the "
                f"pilot, the mean and the most samples per prompt), got {self.pilot_samples}, "
                f"{self.n_samples}, {self.max_samples}; lower pilot_samples or raise "
                "max_samples."
            )
        if (
            self.sampling.greedy and max(self.n_samples, adaptive * self.pilot_samples) > 1
        ):  # SamplingConfig checks top_p
            raise ValueError(
                f"temperature 0 (greedy) gives {self.n_samples} identical samples per prompt, "
                "so V* would be one reward; sample with temperature > 0, or use n_samples 1."
            )

    @property
    def sampling(self) -> SamplingConfig:
        """The :class:`~astarpo.llm.rollout.base.SamplingConfig` of the reference samples."""
        return SamplingConfig(self.max_new_tokens, self.temperature, self.top_p)

    def replace(self, **changes: Any) -> Stage1Config:
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)


def training_stage1_config(
    config: Any, n_samples: int, beta1: float, seed: int, allocation: str = "fixed"
) -> Stage1Config:
    """The Stage 1 a trainer runs itself (a refresh, the streamed Stage 1): ``n_samples`` per
    prompt, ``beta1``, ``allocation`` (adaptive: the default pilot and cap, widened to hold
    ``n_samples``), the training ``config``'s sampling (``max_new_tokens``, ``temperature``,
    ``top_p``) and ``reward_timeout``, ``seed``, ``generation_batch_size // n_samples`` prompts
    per generate call (at least 1), no progress bar."""
    default = Stage1Config()
    return Stage1Config(
        n_samples=n_samples,
        beta1=beta1,
        max_new_tokens=config.max_new_tokens,
        temperature=config.temperature,
        top_p=config.top_p,
        seed=seed,
        prompts_per_call=max(1, config.generation_batch_size // n_samples),
        allocation=allocation,
        pilot_samples=min(default.pilot_samples, n_samples),
        max_samples=max(default.max_samples, n_samples),
        reward_timeout=config.reward_timeout,
        progress=False,
    )
