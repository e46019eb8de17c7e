r"""One training run of the zero-pass study, in its own process (the harness worker calls
:func:`run_one`).

The library's trainer (:func:`~astarpo.studies.harness.training.train_run`) under the study's
protocol, on one training set, plus what this study measures:

* the held-out curves on the hard and the easy prompts apart, read exactly from the gold
  response's probability (:func:`evaluate_sets`: the expected sampled accuracy of an
  exact-match reward, and its log, which moves long before an accuracy does);
* every training sample's reward, counted per prompt kind (:class:`SuccessCounter`): how many
  hard-prompt successes each algorithm sampled;
* at the end, the check of A*-PO's update on the training prompts (:func:`log_ratio_check`):
  for a sampled response y the regression target of
  :math:`\beta_2 \log \pi(y|x)/\pi_{ref}(y|x)` is :math:`r(x, y) - \hat V^*(x)`, so on a prompt
  with :math:`\hat V^* = 0` a failure is pulled back to the reference (target 0) and a success
  pushed toward 1.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from astarpo.llm.models.loading import load_pretrained_model
from astarpo.llm.models.toy import make_char_tokenizer
from astarpo.llm.rewards.scoring import reward_name
from astarpo.llm.stage1.table import ValueTable
from astarpo.llm.toy.tasks import get_task
from astarpo.studies.harness.measure import gold_logprobs, sample_scores
from astarpo.studies.harness.protocol import (
    DROP_ARM,
    Protocol,
    algorithm_config,
    arm_algorithm,
    config_from_dict,
)
from astarpo.studies.harness.training import drop_all_wrong, train_run

__all__ = ["SuccessCounter", "evaluate_sets", "log_ratio_check", "run_one"]


class SuccessCounter:
    """A reward function that scores with ``reward`` and counts samples and successes (reward
    > 0) per prompt kind: ``"hard"`` for the prompts of ``hard``, else ``"easy"``.

    It returns ``reward``'s scores unchanged and carries its name, module and qualified name,
    so a run records (and its V* table's provenance check sees) the reward it computes.

    Args:
        reward: The task's reward (TRL signature, takes ``truncated``).
        hard: The hard prompts (exact texts).
    """

    def __init__(self, reward: Any, hard: Sequence[str]) -> None:
        self.reward = reward
        self.hard = frozenset(hard)
        self.samples = {"hard": 0, "easy": 0}
        self.successes = {"hard": 0, "easy": 0}
        self.__name__ = reward_name(reward)
        self.__module__ = str(getattr(reward, "__module__", type(reward).__module__))
        self.__qualname__ = str(getattr(reward, "__qualname__", self.__name__))

    def __call__(
        self,
        prompts: Sequence[str],
        completions: Sequence[str],
        answer: Sequence[Any],
        truncated: Sequence[bool] | None = None,
        **columns: Any,
    ) -> list[float | None]:
        """Score like ``reward`` and count (``columns`` other than ``report`` are ignored)."""
        scores = self.reward(
            prompts, completions, answer, truncated=truncated, report=columns.get("report")
        )
        for prompt, score in zip(prompts, scores, strict=True):
            kind = "hard" if prompt in self.hard else "easy"
            self.samples[kind] += 1
            self.successes[kind] += int((score or 0.0) > 0)
        return list(scores)


def evaluate_sets(
    model: Any, tokenizer: Any, held_out: dict[str, list[dict[str, Any]]]
) -> dict[str, float]:
    """``{kind}_expected_accuracy`` (mean gold probability) and ``{kind}_log10_gold`` (mean
    log10 of it) for each held-out set ``kind`` (``"hard"``, ``"easy"``)."""
    was_training = model.training
    model.eval()
    res: dict[str, float] = {}
    for kind, rows in held_out.items():
        lp = gold_logprobs(model, tokenizer, rows)
        res[f"{kind}_expected_accuracy"] = float(np.exp(lp).mean())
        res[f"{kind}_log10_gold"] = float(lp.mean() / math.log(10.0))
    model.train(was_training)
    return res


def log_ratio_check(
    policy: Any,
    ref: Any,
    tokenizer: Any,
    groups: dict[str, list[dict[str, Any]]],
    table: ValueTable,
    cfg: Protocol,
    seed: int,
) -> dict[str, Any]:
    r"""One sample per prompt of each group
    (:func:`~astarpo.studies.harness.measure.sample_scores`): :math:`\beta_2 \log\pi/\pi_{ref}`
    against A*-PO's target :math:`r - \hat V^*` (``table``), apart for failures and successes.

    Returns:
        Per group: ``n``, ``n_successes``, and for ``"failures"`` / ``"successes"`` (when any)
        ``beta2_log_ratio`` (mean), ``target`` (mean :math:`r - \hat V^*`) and ``count``.
    """
    policy.eval()
    out: dict[str, Any] = {}
    for name, rows in groups.items():
        if not rows:
            continue
        s = sample_scores(policy, ref, tokenizer, rows, cfg, seed)
        r, ratio = s["reward"], cfg.beta2 * s["log_ratio"]
        target = r - table.v_star([x["prompt"] for x in rows])
        res: dict[str, Any] = {"n": len(rows), "n_successes": int((r > 0).sum())}
        for label, sel in (("failures", r <= 0), ("successes", r > 0)):
            if sel.any():
                res[label] = {
                    "count": int(sel.sum()),
                    "beta2_log_ratio": float(ratio[sel].mean()),
                    "target": float(target[sel].mean()),
                }
        out[name] = res
    return out


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """One run.

    Args:
        spec: ``arm`` (an algorithm or ``astarpo_drop``), ``set`` (training set name), ``seed``,
            ``lr``, ``seconds`` (Stage 2 budget), ``config`` (a
            :class:`~astarpo.studies.harness.protocol.Protocol` as a dict), ``reference``
            (model folder), ``train`` (rows), ``hard_prompts`` (the hard ones among them),
            ``values`` (the set's Stage 1 table), ``held_out`` (``{"hard": rows, "easy":
            rows}``), ``reference_eval`` (the reference's evaluation, the first one: the policy
            starts as a copy of it), ``check`` (the training rows of the final log-ratio check,
            by group), ``check_values`` (a Stage 1 table holding them) and ``out``.

    Returns:
        ``arm``, ``algo``, ``set``, ``seed``, ``lr``, the fields of
        :func:`~astarpo.studies.harness.training.train_run` (evaluations: the keys of
        :func:`evaluate_sets`), ``samples`` and ``successes`` (per prompt kind) and
        ``log_ratio`` (:func:`log_ratio_check`); or ``skipped`` with its reason.
    """
    cfg: Protocol = config_from_dict(Protocol, spec["config"])
    torch.set_num_threads(cfg.threads)
    arm, seed = spec["arm"], int(spec["seed"])
    head = {"arm": arm, "algo": arm_algorithm(arm), "set": spec["set"], "seed": seed}
    head["lr"] = float(spec["lr"])
    table, rows = ValueTable.load(spec["values"]), spec["train"]
    if arm == DROP_ARM:
        table, rows = drop_all_wrong(table, rows)
        if not rows:
            return {**head, "skipped": "every prompt of the set is all wrong in Stage 1"}
    tokenizer = make_char_tokenizer()
    ref: Any = load_pretrained_model(spec["reference"]).eval()
    policy = copy.deepcopy(ref).train()
    task = get_task(cfg.task)
    counter = SuccessCounter(task.reward, spec["hard_prompts"])
    calls = [0]

    def eval_fn(model: Any) -> dict[str, float]:
        calls[0] += 1
        if calls[0] == 1:  # before the first step the policy is the reference
            return dict(spec["reference_eval"])
        return evaluate_sets(model, tokenizer, spec["held_out"])

    args = algorithm_config(arm, cfg, seed, Path(spec["out"]), head["lr"], spec["seconds"])
    v_star = table if arm_algorithm(arm) == "astarpo" else None
    fields = train_run(policy, ref, tokenizer, [counter], args, rows, v_star, eval_fn)
    checked = ValueTable.load(spec["check_values"])
    check = log_ratio_check(policy, ref, tokenizer, spec["check"], checked, cfg, seed + 7919)
    return {
        **head,
        **fields,
        "samples": counter.samples,
        "successes": counter.successes,
        "log_ratio": check,
    }
