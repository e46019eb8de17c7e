r"""What runs in a process of the zero-pass study: one run (:func:`run_one`), the library's
trainer on one training set, plus the held-out curves on the hard and easy prompts apart, read
exactly from the gold response's probability
(:func:`~experiments.harness.measure.evaluate_sets`), each sample's success per prompt kind
(:class:`~experiments.harness.measure.SuccessCounter`) and the final check of A*-PO's
regression target :math:`\beta_2 \log \pi/\pi_{ref} \approx r - \hat V^*`
(:func:`log_ratio_check`): where :math:`\hat V^* = 0` a failure is pulled back to the reference
and a success pushed toward 1; and a shard of the hard set's check (:func:`pass_shard`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from astarpo.llm import ValueTable, get_task
from experiments.harness.measure import SuccessCounter, evaluate_sets, sample_scores, timed_stage1
from experiments.harness.protocol import DROP_ARM, Protocol, algorithm_config, arm_algorithm
from experiments.harness.training import drop_all_wrong, load_run, train_run

__all__ = ["log_ratio_check", "pass_shard", "run_one"]


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
    (:func:`~experiments.harness.measure.sample_scores`): :math:`\beta_2 \log\pi/\pi_{ref}`
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
        r, ratio = s["reward"], cfg.astarpo.beta2 * s["log_ratio"]
        target = r - table.v_star([x["prompt"] for x in rows])
        res: dict[str, Any] = {"n": len(rows), "n_successes": int((r > 0).sum())}
        for label, sel in (("failures", r <= 0), ("successes", r > 0)):
            if sel.any():
                res[label] = {"count": int(sel.sum()), "beta2_log_ratio": float(ratio[sel].mean())}
                res[label]["target"] = float(target[sel].mean())
        out[name] = res
    return out


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """One run of ``spec``: ``arm``, ``set``, ``seed``, ``lr``, ``seconds`` (Stage 2 budget),
    ``config`` (a :class:`~experiments.harness.protocol.Protocol` dict), ``reference``,
    ``train`` (rows), ``hard_prompts``, ``values`` (the set's Stage 1 table), ``held_out``
    (``{"hard": rows, "easy": rows}``), ``reference_eval`` (the first evaluation), ``check``
    (rows of the log-ratio check by kind), ``check_values`` (their table) and ``out``.

    Returns:
        ``arm``, ``algo``, ``set``, ``seed``, ``lr``, the fields of
        :func:`~experiments.harness.training.train_run`, ``samples`` and ``successes`` (per
        prompt kind) and ``log_ratio``; or ``skipped`` with its reason.
    """
    arm, seed = spec["arm"], int(spec["seed"])
    head = {"arm": arm, "algo": arm_algorithm(arm), "set": spec["set"], "seed": seed}
    head["lr"] = float(spec["lr"])
    table, rows = ValueTable.load(spec["values"]), spec["train"]
    if arm == DROP_ARM:
        table, rows = drop_all_wrong(table, rows)
        if not rows:
            return {**head, "skipped": "every prompt of the set is all wrong in Stage 1"}
    cfg, tokenizer, ref, policy = load_run(spec, Protocol)
    counter = SuccessCounter(get_task(cfg.task).reward, spec["hard_prompts"])
    first = iter([dict(spec["reference_eval"])])  # before the first step: the reference

    def eval_fn(model: Any) -> dict[str, float]:
        return next(first, None) or evaluate_sets(model, tokenizer, spec["held_out"])

    args = algorithm_config(arm, cfg, seed, Path(spec["out"]), head["lr"], spec["seconds"])
    v_star = table if arm_algorithm(arm) == "astarpo" else None
    fields = train_run(policy, ref, tokenizer, [counter], args, rows, v_star, eval_fn)
    checked = ValueTable.load(spec["check_values"])
    check = log_ratio_check(policy, ref, tokenizer, spec["check"], checked, cfg, seed + 7919)
    counts = {"samples": counter.samples, "successes": counter.successes}
    return {**head, **fields, **counts, "log_ratio": check}


def pass_shard(spec: dict[str, Any]) -> dict[str, Any]:
    """Shard ``spec["shard"] = [i, k]`` of the hard set's check: Stage 1 of ``spec["reference"]``
    under ``spec["config"]`` (a :class:`~experiments.harness.protocol.Protocol` dict) with
    seed ``spec["seed"]`` into ``spec["path"]``'s part file. Returns ``{"rows": the shard's
    prompt count}``."""
    cfg, tokenizer, ref, _ = load_run(spec, Protocol)
    shard, path = (int(spec["shard"][0]), int(spec["shard"][1])), Path(spec["path"])
    table, _ = timed_stage1(ref, tokenizer, spec["rows"], cfg, path, int(spec["seed"]), shard)
    return {"rows": len(table)}
