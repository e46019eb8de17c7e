"""A*-PO in verl (0.9): the advantage estimator and policy loss ``astarpo``, and its reward.

Importing this package registers :func:`~astarpo.integrations.verl.algorithm.
compute_astarpo_advantage` and :func:`~astarpo.integrations.verl.algorithm.
compute_astarpo_policy_loss` under the name ``astarpo`` with verl's ``register_adv_est`` and
``register_policy_loss`` (when verl is installed; without it, importing registers nothing and
needs no verl). verl imports it by itself in every process, driver and workers:

* through the ``verl.plugins`` entry point that installing astarpo declares (verl loads every
  entry point of that group on ``import verl`` unless ``VERL_USE_EXTERNAL_PLUGINS=none``; a
  plugin that fails to load is logged by verl at debug level only, so this package logs its
  own failure as a warning);
* or, where entry points are off, through ``VERL_USE_EXTERNAL_MODULES=astarpo.integrations.verl``
  (verl imports the listed modules on ``import verl``; an import error is raised).

Then ``algorithm.adv_estimator=astarpo``, ``actor_rollout_ref.actor.policy_loss.loss_mode=
astarpo`` and the reward :func:`~astarpo.integrations.verl.reward.compute_score` train A*-PO's
Stage 2 (the settings and the identity are in :mod:`astarpo.integrations.verl.algorithm`; the
command line in ``docs/at_scale.md``). The training parquet with V* comes from
``astarpo value --export-verl``.
"""

from __future__ import annotations

import importlib.util

from astarpo.integrations.verl.algorithm import (
    LOSS_AGG_MODE,
    NAME,
    check_verl_config,
    compute_astarpo_advantage,
    compute_astarpo_policy_loss,
    register,
)
from astarpo.integrations.verl.reward import (
    astarpo_score,
    compute_score,
    optimal_advantage_score,
    row_v_star,
)

__all__ = [
    "LOSS_AGG_MODE",
    "NAME",
    "astarpo_score",
    "check_verl_config",
    "compute_astarpo_advantage",
    "compute_astarpo_policy_loss",
    "compute_score",
    "optimal_advantage_score",
    "register",
    "row_v_star",
]

if importlib.util.find_spec("verl") is not None:
    register()
