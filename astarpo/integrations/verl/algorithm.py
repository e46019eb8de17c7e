r"""A*-PO's Stage 2 as verl's advantage estimator and policy loss, both named ``astarpo``.

verl's policy loss sees ``old_log_prob``, ``log_prob``, ``advantages`` and ``response_mask``
(``[B, T]`` token tensors) but no reference log-probs, and its advantage estimator sees no
dataset column. A*-PO fits anyway, with verl's KL-in-reward:

1. The reward (:func:`~astarpo.integrations.verl.reward.optimal_advantage_score`) is
   :math:`A = r - V^*`, placed by verl on the last response token.
2. ``algorithm.use_kl_in_reward=True``, ``kl_penalty=kl``, a fixed ``kl_ctrl.kl_coef =``
   :math:`\beta_2`: verl's ``apply_kl_penalty`` subtracts
   :math:`\beta_2 (\log\pi_{old}(y_t) - \log\pi_{ref}(y_t))` from every token's reward.
3. :func:`compute_astarpo_advantage` sums the token rewards of each response and copies the
   sum to its tokens: :math:`a = A - \beta_2 \Delta_{old}`, with
   :math:`\Delta_{old} = \sum_t (\log\pi_{old} - \log\pi_{ref})`.
4. :func:`compute_astarpo_policy_loss` is, per response,
   :math:`\big(\beta_2 \sum_t(\log\pi_\theta - \log\pi_{old}) - a\big)^2`, averaged over the
   responses (``loss_agg_mode=seq-mean-token-sum``).

Since :math:`\beta_2 (\log\pi_\theta - \log\pi_{old}) - (A - \beta_2(\log\pi_{old} -
\log\pi_{ref})) = \beta_2 (\log\pi_\theta - \log\pi_{ref}) - A`, step 4 is A*-PO's loss
(paper Eq. 4) exactly, on and off policy (several minibatches, several epochs), as long as the
KL step and the loss read the same ``old_log_probs`` tensor (they do in verl 0.9).

:math:`\beta_2` is ``algorithm.kl_ctrl.kl_coef`` (the KL-in-reward coefficient). The loss,
which sees only the actor's config, reads it from ``actor_rollout_ref.actor.kl_loss_coef``
(verl's actor KL coefficient, unused while ``use_kl_loss=False``); the estimator, which sees
the whole config, refuses a run where the two differ (:func:`check_verl_config`). Both default
to 0.001 in verl, the paper's :math:`\beta_2`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from astarpo.objective import advantage_regression_loss, check_beta

__all__ = [
    "LOSS_AGG_MODE",
    "NAME",
    "check_verl_config",
    "compute_astarpo_advantage",
    "compute_astarpo_policy_loss",
    "register",
]

log = logging.getLogger(__name__)

NAME = "astarpo"
"""The name of the estimator (``algorithm.adv_estimator``) and of the loss
(``actor_rollout_ref.actor.policy_loss.loss_mode``)."""

LOSS_AGG_MODE = "seq-mean-token-sum"
"""The one aggregation that gives A*-PO's per-response mean (``actor.loss_agg_mode``)."""

_KL_PENALTIES = ("kl", "k1")  # verl's names of logprob - ref_logprob


def _select(config: Any, path: str) -> Any:
    """``config.a.b.c`` of a nested mapping, DictConfig or verl config dataclass; None when a
    key is missing."""
    node = config
    for part in path.split("."):
        if node is None:
            return None
        node = node.get(part) if isinstance(node, Mapping) else getattr(node, part, None)
    return node


def _algorithm_problems(algorithm: Any) -> list[str]:
    """What is wrong in the ``algorithm`` section for A*-PO (each with the override to fix)."""
    problems = []
    if _select(algorithm, "use_kl_in_reward") is not True:
        problems.append("algorithm.use_kl_in_reward must be True (V* and the KL term ride in it)")
    if _select(algorithm, "kl_penalty") not in _KL_PENALTIES:
        got = _select(algorithm, "kl_penalty")
        problems.append(f"algorithm.kl_penalty must be kl (logprob - ref_logprob), got {got!r}")
    if _select(algorithm, "kl_ctrl.type") != "fixed":
        got = _select(algorithm, "kl_ctrl.type")
        problems.append(f"algorithm.kl_ctrl.type must be fixed (beta2 is constant), got {got!r}")
    try:
        check_beta(_select(algorithm, "kl_ctrl.kl_coef"), "algorithm.kl_ctrl.kl_coef (beta2)")
    except ValueError as e:
        problems.append(str(e))
    return problems


def check_verl_config(config: Any) -> float:
    r"""Check a whole verl config (a ``DictConfig`` or nested mapping) for A*-PO; return beta2.

    Args:
        config: verl's trainer config (the root, holding ``algorithm`` and
            ``actor_rollout_ref``).

    Returns:
        :math:`\beta_2` = ``algorithm.kl_ctrl.kl_coef``.

    Raises:
        ValueError: listing every setting A*-PO needs and the run lacks, each with its value:
            ``algorithm.adv_estimator=astarpo``, ``use_kl_in_reward=True``, ``kl_penalty=kl``,
            ``kl_ctrl.type=fixed``, ``actor_rollout_ref.actor.kl_loss_coef`` equal to
            ``algorithm.kl_ctrl.kl_coef``, ``actor.use_kl_loss=False``,
            ``actor.policy_loss.loss_mode=astarpo``, ``actor.loss_agg_mode=seq-mean-token-sum``
            and ``actor_rollout_ref.rollout.n=1``.
    """
    problems = _algorithm_problems(_select(config, "algorithm"))
    actor = _select(config, "actor_rollout_ref.actor")
    wanted = {
        "algorithm.adv_estimator": (_select(config, "algorithm.adv_estimator"), NAME),
        "actor_rollout_ref.actor.policy_loss.loss_mode": (
            _select(actor, "policy_loss.loss_mode"),
            NAME,
        ),
        "actor_rollout_ref.actor.loss_agg_mode": (_select(actor, "loss_agg_mode"), LOSS_AGG_MODE),
        "actor_rollout_ref.actor.use_kl_loss": (_select(actor, "use_kl_loss"), False),
        "actor_rollout_ref.rollout.n": (_select(config, "actor_rollout_ref.rollout.n"), 1),
    }
    for key, (got, want) in wanted.items():
        if got != want:
            problems.append(f"{key} must be {want}, got {got!r}")
    beta2 = _select(config, "algorithm.kl_ctrl.kl_coef")
    actor_beta2 = _select(actor, "kl_loss_coef")
    if actor_beta2 != beta2:
        problems.append(
            f"actor_rollout_ref.actor.kl_loss_coef ({actor_beta2!r}) must equal "
            f"algorithm.kl_ctrl.kl_coef ({beta2!r}): the loss reads beta2 from the first, the KL "
            "in the reward uses the second"
        )
    if problems:
        raise ValueError(
            "verl config not set up for A*-PO (docs/at_scale.md has the command line):\n  - "
            + "\n  - ".join(problems)
        )
    return float(beta2)


def _whole_config(algorithm: Any) -> Any:
    """The root config of verl's ``algorithm`` node (a ``DictConfig`` child), else None."""
    try:
        from omegaconf import DictConfig, OmegaConf
    except ImportError:  # pragma: no cover - verl depends on omegaconf
        return None
    if not isinstance(algorithm, DictConfig):
        return None
    parent = OmegaConf.select(algorithm, "..", default=None)
    return parent if _select(parent, "actor_rollout_ref") is not None else None


def compute_astarpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    config: Any = None,
    index: Sequence[Any] | np.ndarray | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""verl's advantage estimator ``astarpo``: each response's summed token reward, on each of
    its tokens.

    .. math::

        a_i = \sum_t \mathrm{token\_level\_rewards}_{i,t} = (r_i - V^*_i) -
              \beta_2 \sum_t (\log\pi_{old} - \log\pi_{ref})_{i,t}

    (the second form once the reward is ``r - V*`` and verl's KL-in-reward subtracted
    :math:`\beta_2 (\log\pi_{old} - \log\pi_{ref})` per token).

    Args:
        token_level_rewards: verl's token rewards ``[B, T]``, after ``apply_kl_penalty``.
        response_mask: 1 on response tokens ``[B, T]``.
        config: ``algorithm`` section of verl's config. Refused unless it has the KL-in-reward
            settings above; when it is a node of the whole config (as verl passes it),
            :func:`check_verl_config` checks the rest (beta2 of the loss, ``rollout.n``).
        index: The prompt id (``uid``) of each row ``[B]``; a repeated one means several
            responses per prompt, refused (A*-PO samples one: ``rollout.n=1``).
        **kwargs: Other inputs verl passes (unused).

    Returns:
        ``(advantages, returns)``, both ``a_i`` on response tokens and 0 elsewhere ``[B, T]``.

    Raises:
        ValueError: a config A*-PO cannot run with, or a repeated ``index``.
    """
    if config is not None:
        whole = _whole_config(config)
        if whole is not None:
            check_verl_config(whole)
        elif problems := _algorithm_problems(config):
            raise ValueError("verl config not set up for A*-PO: " + "; ".join(problems))
    if index is not None and len(set(np.asarray(index, dtype=object).tolist())) != len(index):
        raise ValueError(
            "the astarpo estimator got several responses per prompt (repeated uid); A*-PO samples "
            "one response per prompt: set actor_rollout_ref.rollout.n=1."
        )
    mask = response_mask.to(token_level_rewards.dtype)
    a = (token_level_rewards * mask).sum(-1)  # [B]
    advantages = a.unsqueeze(-1) * mask
    return advantages, advantages


def _actor_beta2(config: Any) -> float:
    """beta2 of the loss: the actor's ``kl_loss_coef``, checked."""
    if config is None:
        raise ValueError("the astarpo policy loss needs verl's actor config (for beta2).")
    return check_beta(_select(config, "kl_loss_coef"), "actor_rollout_ref.actor.kl_loss_coef")


def _check_actor(config: Any, loss_agg_mode: str, rollout_is_weights: Any) -> None:
    if loss_agg_mode != LOSS_AGG_MODE:
        raise ValueError(
            f"the astarpo policy loss needs actor_rollout_ref.actor.loss_agg_mode={LOSS_AGG_MODE} "
            f"(one squared residual per response, averaged over responses), got {loss_agg_mode!r}."
        )
    if _select(config, "use_kl_loss"):
        raise ValueError(
            "the astarpo policy loss carries the KL term itself (through the reward): set "
            "actor_rollout_ref.actor.use_kl_loss=False."
        )
    n = _select(config, "rollout_n")
    if n is not None and n != 1:
        raise ValueError(f"A*-PO samples one response per prompt: set rollout.n=1 (got {n}).")
    if rollout_is_weights is not None:
        raise ValueError(
            "the astarpo policy loss takes no rollout importance weights (a least-squares "
            "regression needs none): set algorithm.rollout_correction.rollout_is=null."
        )


def compute_astarpo_policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = LOSS_AGG_MODE,
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    r"""verl's policy loss ``astarpo``: A*-PO's regression on verl's token tensors.

    With :math:`\log\pi_\theta(y) = \sum_t` ``log_prob``, :math:`\log\pi_{old}(y) = \sum_t`
    ``old_log_prob`` (response tokens) and :math:`a` the advantage of
    :func:`compute_astarpo_advantage`, the loss of a response is
    ``advantage_regression_loss(logp=log pi_theta(y), logp_ref=log pi_old(y), reward=a,
    v_star=0, beta=beta2)``:

    .. math::

        \ell = \big(\beta_2 (\log\pi_\theta(y) - \log\pi_{old}(y)) - a\big)^2
             = \big(\beta_2 (\log\pi_\theta(y) - \log\pi_{ref}(y)) - (r - V^*)\big)^2

    the second form being :meth:`astarpo.AdvantageRegression.loss` (paper Eq. 4), since
    :math:`a = (r - V^*) - \beta_2(\log\pi_{old}(y) - \log\pi_{ref}(y))`. The old policy plays
    the reference's part in the call because verl hands the loss no reference log-probs: its
    KL-in-reward moved them into ``a``. ``\ell`` sits on each response's first token of a
    ``[B, T]`` loss matrix that verl's ``agg_loss`` reduces with ``seq-mean-token-sum`` (and
    its global batch sizes, so gradient accumulation and data parallelism give the mean over
    the mini-batch's responses).

    Args:
        old_log_prob: Token log-probs of the policy that sampled ``[B, T]`` (the tensor verl's
            KL-in-reward used).
        log_prob: Token log-probs of the current policy ``[B, T]`` (with gradient).
        advantages: :func:`compute_astarpo_advantage`'s output ``[B, T]``.
        response_mask: 1 on response tokens ``[B, T]``.
        loss_agg_mode: Must be ``"seq-mean-token-sum"``.
        config: verl's actor config: ``kl_loss_coef`` is :math:`\beta_2`; ``use_kl_loss`` must
            be False and ``rollout_n`` 1; ``global_batch_info`` is passed to ``agg_loss``.
        rollout_is_weights: Must be None (no importance weights).

    Returns:
        ``(loss, metrics)``: the scalar loss and ``actor/astarpo_*`` metrics (the mean
        per-response log-ratio to the old policy, the mean advantage, the mean squared
        residual).

    Raises:
        ValueError: another aggregation, a KL loss, ``rollout_n != 1``, importance weights, or
            an invalid ``kl_loss_coef``.
    """
    from verl.trainer.ppo.core_algos import agg_loss  # verl is there when verl calls this

    beta2 = _actor_beta2(config)
    _check_actor(config, loss_agg_mode, rollout_is_weights)
    mask = response_mask.to(log_prob.dtype)
    logp = (log_prob * mask).sum(-1)
    logp_old = (old_log_prob * mask).sum(-1)
    first = response_mask.to(torch.long).argmax(-1, keepdim=True)  # each response's first token
    a = advantages.gather(-1, first).squeeze(-1)
    # check=False: beta2 is checked above; verl checks the loss and the gradient norm.
    seq_loss = advantage_regression_loss(
        logp, logp_old, a, torch.zeros_like(a), beta2, "none", False
    )
    loss_mat = torch.zeros_like(log_prob).scatter(-1, first, seq_loss.unsqueeze(-1))
    batch_info = dict(_select(config, "global_batch_info") or {})
    loss = agg_loss(
        loss_mat=loss_mat, loss_mask=response_mask, loss_agg_mode=LOSS_AGG_MODE, **batch_info
    )
    metrics = {
        "actor/astarpo_log_ratio_old": float((logp - logp_old).detach().mean()),
        "actor/astarpo_advantage": float(a.detach().mean()),
        "actor/astarpo_sq_residual": float(seq_loss.detach().mean()),
    }
    return loss, metrics


def register() -> None:
    """Register :func:`compute_astarpo_advantage` and :func:`compute_astarpo_policy_loss` under
    :data:`NAME` with verl's ``register_adv_est`` and ``register_policy_loss``.

    verl calls it (through the ``verl.plugins`` entry point, or ``VERL_USE_EXTERNAL_MODULES``)
    in every process that imports verl. A failure is logged as a warning before it is raised,
    because verl logs the errors of its plugins only at debug level.
    """
    try:
        from verl.trainer.ppo.core_algos import register_adv_est, register_policy_loss

        register_adv_est(NAME)(compute_astarpo_advantage)
        register_policy_loss(NAME)(compute_astarpo_policy_loss)
    except Exception as e:
        log.warning("astarpo: registering the A*-PO estimator and loss with verl failed: %r", e)
        raise
