r"""One training run of the zero-pass benchmark (:mod:`astarpo.llm.bench.zero_pass`).

The library's :class:`~astarpo.llm.training.trainer.Trainer` with a run of the efficiency
benchmark's settings (:func:`~astarpo.llm.bench.config.algorithm_config`, its
:class:`~astarpo.llm.bench.worker.Recorder`), on one training set, plus what this benchmark
measures and the bench does not:

* the held-out curves on the hard and the easy prompts apart, read exactly from the gold
  response's probability (:func:`gold_logprobs`: the expected sampled accuracy of an exact-match
  reward, and its log, which moves long before an accuracy does);
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

from astarpo.llm.bench.config import DROP_ARM, algorithm_config, arm_algorithm
from astarpo.llm.bench.worker import SPEC_PATHS, Recorder, check_spec_paths, config_from_dict
from astarpo.llm.models.loading import load_pretrained_model
from astarpo.llm.models.logprobs import sequence_logprobs
from astarpo.llm.models.toy import make_char_tokenizer
from astarpo.llm.rewards.scoring import reward_name
from astarpo.llm.rollout.base import SamplingConfig
from astarpo.llm.rollout.hf import HFGenerator
from astarpo.llm.stage1.table import ValueTable
from astarpo.llm.toy.tasks import get_task
from astarpo.llm.training.trainer import Trainer

__all__ = ["SuccessCounter", "evaluate_sets", "gold_logprobs", "log_ratio_check", "run_one"]

LN10 = math.log(10.0)


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


def gold_logprobs(
    model: Any, tokenizer: Any, rows: Sequence[dict[str, Any]], batch: int = 128
) -> np.ndarray:
    r""":math:`\log \pi(a \oplus \mathrm{EOS} \mid x)` of each row's gold response ``a``, ``[B]``.

    ``exp`` of it is the probability that one sample at temperature 1 is the gold response: the
    expected sampled accuracy of an exact-match reward, without sampling noise.
    """
    out = []
    pad, eos = int(tokenizer.pad_token_id), int(tokenizer.eos_token_id)
    for i in range(0, len(rows), batch):
        part = rows[i : i + batch]
        prompts = tokenizer([r["prompt"] for r in part], add_special_tokens=False)["input_ids"]
        answers = tokenizer([str(r["answer"]) for r in part], add_special_tokens=False)
        responses = [[*a, eos] for a in answers["input_ids"]]
        with torch.no_grad():
            out.append(sequence_logprobs(model, prompts, responses, pad).logp.double().cpu())
    return torch.cat(out).numpy() if out else np.zeros(0)


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
        res[f"{kind}_log10_gold"] = float(lp.mean() / LN10)
    model.train(was_training)
    return res


def log_ratio_check(
    policy: Any,
    ref: Any,
    tokenizer: Any,
    groups: dict[str, list[dict[str, Any]]],
    table: ValueTable,
    reward: Any,
    beta2: float,
    max_new_tokens: int,
    seed: int,
) -> dict[str, Any]:
    r"""One sample per prompt of each group; :math:`\beta_2 \log\pi/\pi_{ref}` against A*-PO's
    target :math:`r - \hat V^*` (``table``), apart for failures and successes.

    Returns:
        Per group: ``n``, ``n_successes``, and for ``"failures"`` / ``"successes"`` (when any)
        ``beta2_log_ratio`` (mean), ``target`` (mean :math:`r - \hat V^*`) and ``count``.
    """
    policy.eval()
    gen = HFGenerator(policy, tokenizer, 512)
    pad = int(tokenizer.pad_token_id)
    out: dict[str, Any] = {}
    for name, rows in groups.items():
        if not rows:
            continue
        prompts = [r["prompt"] for r in rows]
        roll = gen.generate(prompts, 1, SamplingConfig(max_new_tokens, 1.0), seed)
        answers = [x["answer"] for x in rows]
        scores = reward(prompts, roll.completions, answers, truncated=roll.truncated)
        r = np.array([x or 0.0 for x in scores], dtype=np.float64)
        with torch.no_grad():
            lp = sequence_logprobs(policy, roll.prompt_ids, roll.response_ids, pad).logp
            lr = sequence_logprobs(ref, roll.prompt_ids, roll.response_ids, pad).logp
        ratio = beta2 * (lp - lr).double().cpu().numpy()
        target = r - table.v_star(prompts)
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
            ``lr``, ``seconds`` (Stage 2 budget), ``config`` (a BenchConfig as a dict),
            ``reference`` (model directory), ``train`` (rows), ``hard_prompts`` (the hard ones
            among them), ``values`` (the set's Stage 1 table), ``held_out`` (``{"hard": rows,
            "easy": rows}``), ``reference_eval`` (the evaluation of the reference, used for the
            first evaluation: the policy starts as a copy of it), ``check`` (the training rows
            of the final log-ratio check, by group), ``check_values`` (a Stage 1 table holding
            them) and ``out`` (run directory); the paths absolute.

    Returns:
        ``arm``, ``algo``, ``set``, ``seed``, ``lr``, ``evals`` (each with ``stage2_time``,
        ``step`` and the keys of :func:`evaluate_sets`), ``steps``, ``train_s``, ``pool``,
        ``samples`` and ``successes`` (per prompt kind), ``samples_per_prompt``,
        ``log_ratio`` (:func:`log_ratio_check`); or ``skipped`` with its reason.

    Raises:
        ValueError: a path of the spec is relative
            (:func:`~astarpo.llm.bench.worker.check_spec_paths`).
    """
    check_spec_paths(spec, (*SPEC_PATHS, "check_values"))
    cfg = config_from_dict(spec["config"])
    torch.set_num_threads(cfg.threads)
    arm, seed = spec["arm"], int(spec["seed"])
    head = {"arm": arm, "algo": arm_algorithm(arm), "set": spec["set"], "seed": seed}
    head["lr"] = float(spec["lr"])
    table = ValueTable.load(spec["values"])
    rows: list[dict[str, Any]] = spec["train"]
    if arm == DROP_ARM:
        table = ValueTable([r for r in table if r.pass_rate > 0])
        rows = [r for r in rows if r["prompt"] in table]
        if not rows:
            return {**head, "skipped": "every prompt of the set is all wrong in Stage 1"}
    tokenizer = make_char_tokenizer()
    ref: Any = load_pretrained_model(spec["reference"])
    ref = ref.eval()
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
    recorder = Recorder()
    is_astarpo = arm_algorithm(arm) == "astarpo"
    trainer = Trainer(
        policy,
        ref,
        [counter],
        args=args,
        train_dataset=rows,
        v_star_table=table if is_astarpo else None,
        tokenizer=tokenizer,
        eval_fn=eval_fn,
        callbacks=[recorder],
    )
    trainer.train()
    check = log_ratio_check(
        policy,
        ref,
        tokenizer,
        spec["check"],
        ValueTable.load(spec["check_values"]),
        task.reward,
        cfg.beta2,
        cfg.max_new_tokens,
        seed + 7919,
    )
    return {
        **head,
        "evals": recorder.evals,
        "steps": recorder.steps,
        "train_s": trainer.train_time,
        "pool": len(rows),
        "samples": counter.samples,
        "successes": counter.successes,
        "samples_per_prompt": trainer.algorithm.samples_per_prompt,
        "log_ratio": check,
    }
