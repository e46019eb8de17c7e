r"""Stage 1 of A*-PO: the V* table, and how to fill it from a reference model.

For every prompt ``x``, :func:`estimate_values` samples ``N`` responses from the reference
policy, scores them and stores

.. math:: \hat V^*(x) = \beta_1 \log \frac{1}{N} \sum_{i=1}^N e^{r(x, y_i)/\beta_1}
   \qquad \text{(paper Eq. 3, computed by } ``astarpo.optimal_value``)

in a :class:`ValueTable`, which Stage 2 queries with :meth:`ValueTable.v_star`.

The table and its file format are in :mod:`astarpo.llm.stage1.table` (re-exported here). Rows are
appended a batch at a time, whole or undone (a full disk is named; one fsync at the end); a torn
last line is dropped with a warning (corruption elsewhere is an error naming the file and line).
SIGTERM/SIGINT stop after the current batch, its rows written and fsynced. A rerun with the same
settings skips the prompts already in the file and, batches being a fixed partition of the prompts
with seeds derived from the batch's prompt keys, produces the same table as an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from astarpo import __version__
from astarpo.allocation import allocate
from astarpo.llm.data.files import append_bytes
from astarpo.llm.data.prompts import prompt_key
from astarpo.llm.data.rows import check_duplicate_answers, check_reward_columns
from astarpo.llm.parallel.dist import barrier, init_distributed
from astarpo.llm.parallel.progress import progress_bar
from astarpo.llm.parallel.signals import StopSignals
from astarpo.llm.rewards.scoring import as_reward_funcs, reward_name, reward_path
from astarpo.llm.rollout.backend import reference_sampler
from astarpo.llm.rollout.base import derive_seed
from astarpo.llm.rollout.scored import sample_and_score
from astarpo.llm.stage1.config import Stage1Config
from astarpo.llm.stage1.provenance import MATCHING, data_fingerprint, model_name
from astarpo.llm.stage1.rows import (
    ValueRow,
    make_row,
    open_locked,
    resume_rows,
)
from astarpo.llm.stage1.shards import in_shard, merge_shards, part_path
from astarpo.llm.stage1.table import ValueTable, jsonl_bytes

__all__ = ["estimate_values", "estimate_values_by_rank"]

logger = logging.getLogger(__name__)


def _unique(rows: Sequence[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    seen: dict[str, dict[str, Any]] = {}
    for i, r in enumerate(rows):
        if "prompt" not in r:
            raise KeyError(
                f"row {i} has no 'prompt' (keys {sorted(r)}); load the data with "
                "astarpo.llm.data.load_prompts, which adds it."
            )
        seen.setdefault(prompt_key(r["prompt"]), r)
    if len(seen) < len(rows):
        logger.warning("%d duplicate prompts ignored in Stage 1.", len(rows) - len(seen))
    return list(seen.items())


def estimate_values(
    generator: Any = None,
    rows: Iterable[Mapping[str, Any]] = (),
    reward_funcs: Any = (),
    config: Stage1Config | None = None,
    *,
    out_path: str | os.PathLike[str] | None = None,
    shard: tuple[int, int] | None = None,
    provenance: dict[str, Any] | None = None,
    model: Any = None,
    tokenizer: Any = None,
) -> ValueTable:
    """Stage 1: sample ``n_samples`` reference responses per prompt, score them, write V*.

    In one call from Python (TRL style)::

        table = estimate_values(model="models/base", rows=dataset, reward_funcs=fn,
                                config=Stage1Config(n_samples=8, beta1=0.5, max_new_tokens=512))
        trainer = AStarPOTrainer(model="models/base", ..., v_star_table=table)

    With a file (``out_path``) it is resumable: rows already in the file (same settings) are
    kept and their prompts skipped. Duplicate prompts are computed once.

    Args:
        generator: A :class:`~astarpo.llm.rollout.base.Generator` sampling from the reference;
            or give ``model`` instead.
        rows: Dataset rows (a list of dicts or a ``datasets.Dataset``) with ``prompt`` (text or
            chat messages, rendered with the tokenizer's chat template) and the reward columns
            (e.g. ``answer``).
        reward_funcs: One reward function or a list (TRL signature), summed by
            :func:`~astarpo.llm.rewards.scoring.compute_rewards`.
        config: The :class:`~astarpo.llm.stage1.config.Stage1Config` (N, ``beta1``, sampling,
            seed, prompts per ``generate`` call, reward deadline, ...); default
            ``Stage1Config()`` (the paper's N = 8 and ``beta1 = 0.5``).
        out_path: The table file (JSONL); ``None`` keeps the table in memory and writes
            nothing. With ``shard=(i, k)`` the part file :func:`part_path` ``(out_path, i, k)``
            is written instead.
        shard: ``(i, k)``: only the prompts whose key hash is ``i`` mod ``k``.
        provenance: Extra provenance (e.g. ``{"model": "Qwen/Qwen2.5-1.5B"}``).
        model: The reference model (object, local directory or hub id) sampled with the HF
            backend, instead of ``generator``.
        tokenizer: Its tokenizer (default: loaded with the model, or from its directory).

    Returns:
        The table of this run's prompts (of this shard).

    Raises:
        ValueTableError: if the file exists with different settings, or is corrupt.
        ValueError: on bad arguments (``out_path`` a folder, a shard without it), rows
            lacking a column a reward needs, duplicate prompts with different answers, a
            generator returning the wrong number of responses, ``filter_all_wrong``
            leaving no prompt (the file keeps every row), or rows the reference cannot take
            (characters its tokenizer cannot encode, prompt + ``max_new_tokens`` past its
            positions), before any sampling.
    """

    cfg = config if config is not None else Stage1Config()
    if not isinstance(cfg, Stage1Config):
        raise TypeError(f"config must be a Stage1Config, got {type(cfg).__name__}.")
    n_samples, beta1, sampling, seed = cfg.n_samples, cfg.beta1, cfg.sampling, cfg.seed
    where = str((provenance or {}).get("data") or "rows")  # the data's name in the errors
    generator, rows, prov_model = reference_sampler(
        generator, model, tokenizer, rows, sampling, where
    )
    reward_funcs = as_reward_funcs(reward_funcs)
    check_reward_columns(reward_funcs, rows)  # before sampling, not after
    check_duplicate_answers(rows)
    if out_path is None and shard is not None:
        raise ValueError("shard=(i, k) writes a part file; give out_path.")
    if out_path is not None and Path(out_path).is_dir():
        raise ValueError(
            f"out_path {os.fspath(out_path)!r} is a folder; give the table's file name, e.g. "
            f"{os.path.join(os.fspath(out_path), 'values.jsonl')!r}."
        )
    path = None if out_path is None else Path(out_path)
    if path is not None and shard is not None:
        path = part_path(path, *shard)
    provenance = {**prov_model, **(provenance or {})}
    if isinstance(provenance.get("model"), str):  # a local folder as its absolute path
        provenance["model"] = model_name(provenance["model"])
    prov: dict[str, Any] = {"model": "unknown", **(provenance or {})}
    prov.update(
        n_samples=n_samples,
        beta1=float(beta1),
        sampling=asdict(sampling),
        reward=[reward_name(f) for f in reward_funcs],
        reward_path=[reward_path(f) for f in reward_funcs],
        data=data_fingerprint(rows),
        seed=seed,
        batch_size=cfg.prompts_per_call,  # its name in tables written before Stage1Config
        allocation=None  # None: n_samples each (and in tables written before adaptive N)
        if cfg.allocation == "fixed"
        else {"rule": cfg.allocation, "pilot": cfg.pilot_samples, "cap": cfg.max_samples},
        astarpo_version=__version__,
    )
    todo = [(k, r) for k, r in _unique(rows) if in_shard(k, shard)]
    done: dict[str, ValueRow] = {}
    fh: Any = contextlib.nullcontext()  # in memory: nothing written
    if path is not None:
        fh = open_locked(path)
        done = resume_rows(fh, path, prov, MATCHING)
        if done:
            print(
                f"{path}: resuming, {len(done)} prompts already done.", file=sys.stderr, flush=True
            )
    step = cfg.prompts_per_call
    batches = [todo[i : i + step] for i in range(0, len(todo), step)]

    initial = sum(k in done for k, _ in todo)
    bar = progress_bar(len(todo), "Stage 1 (V*)", "prompt", initial=initial, enabled=cfg.progress)
    counts: dict[str, float] = {}
    signals = StopSignals("the current batch" + (" and writing its rows" if path else ""))
    with fh as f, signals:
        for batch in batches:
            if all(k in done for k, _ in batch):
                continue
            rewards = _sample_batch(generator, batch, cfg, reward_funcs, counts)
            new = {
                key: make_row(r["prompt"], rw, beta1, prov, r.get("answer"))
                for (key, r), rw in zip(batch, rewards, strict=True)
                if key not in done
            }
            if f is not None and path is not None:  # the rows whole or not at all
                append_bytes(path, jsonl_bytes(new.values()), f, "rerun the same command.")
            done.update(new)
            bar.update(len(new))
            if signals.received:
                break
        if f is not None:
            os.fsync(f.fileno())  # once, not per batch: durable against power loss at the end
    bar.close()
    if signals.received:  # checked out here too: a signal after the last batch's check counts
        where = f": their rows are in {path}; rerun the same command to resume" if path else ""
        signals.stop(f"in Stage 1 after {len(done)} of {len(todo)} prompts{where}.")
    if any(counts.values()):
        logger.warning("Stage 1 unscored responses: %s", counts)
    keep = [done[k] for k, _ in todo if k in done]
    if cfg.filter_all_wrong:
        kept = [r for r in keep if r.pass_rate > 0]
        if keep and not kept and shard is None:  # a shard's part is merged, then filtered
            where = f"their rows are kept in {path}" if path else "nothing was written"
            raise ValueError(
                f"filter_all_wrong (--filter-all-wrong) dropped all {len(keep)} prompts: each "
                f"one's {n_samples} reference samples scored 0 (pass rate 0), so no prompt is "
                f"left to train on ({where}). Keep them (filter_all_wrong=False, "
                "--filter-all-wrong false; the paper does), or use a stronger reference or more "
                "samples (--n-samples)."
            )
        keep = kept
    return ValueTable(keep, path)


def _sample_batch(
    generator: Any,
    batch: Sequence[tuple[str, Mapping[str, Any]]],
    cfg: Stage1Config,
    reward_funcs: Sequence[Any],
    counts: dict[str, float],
) -> list[np.ndarray]:
    """The rewards of each prompt of ``batch`` (``[n]`` each, ``n`` the prompt's samples):
    ``n_samples`` each, or with ``allocation="adaptive"`` a pilot of ``pilot_samples`` and then
    the counts of :func:`~astarpo.allocation.allocate` for the batch's budget of ``n_samples``
    per prompt, the extra samples drawn in one more call. Seeds derive from the batch's keys
    (the pilot's as a fixed run's), so a resumed run draws what an uninterrupted one does.
    Unscored-response counts are added to ``counts``."""
    keys, rows = [k for k, _ in batch], [r for _, r in batch]

    def score(call_rows: list[Mapping[str, Any]], n: int, call_seed: int) -> Any:
        scored = sample_and_score(
            generator.generate,
            call_rows,
            n,
            cfg.sampling,
            call_seed,
            reward_funcs,
            timeout=cfg.reward_timeout,
        )
        for m, v in scored.unscored.items():
            counts[m] = counts.get(m, 0.0) + v
        return scored

    if cfg.allocation == "fixed":
        return list(score(rows, cfg.n_samples, derive_seed(cfg.seed, *keys)).by_prompt)
    pilot = score(rows, cfg.pilot_samples, derive_seed(cfg.seed, *keys)).by_prompt
    want = allocate(pilot, cfg.n_samples * len(rows), cfg.max_samples)
    owner = np.repeat(np.arange(len(rows)), want - cfg.pilot_samples)  # one per extra sample
    rewards = [np.asarray(r, dtype=np.float64) for r in pilot]
    if len(owner):
        more = score([rows[i] for i in owner], 1, derive_seed(cfg.seed, "adaptive", *keys))
        rewards = [np.concatenate([r, more.rewards[owner == i]]) for i, r in enumerate(rewards)]
    return rewards


def estimate_values_by_rank(
    generator: Any,
    rows: Sequence[dict[str, Any]],
    *,
    out_path: str | os.PathLike[str],
    **kwargs: Any,
) -> Any:
    """Stage 1 under ``torchrun``: shard ``(rank, world_size)`` per rank, merged on rank 0.

    Without a process group this is :func:`estimate_values`. With one, every rank runs it with
    ``shard=(rank, world_size)`` (writing its own part file, resumable), waits at a barrier,
    rank 0 merges the parts into ``out_path`` (checking every prompt is there), and every rank
    returns the merged table.

    A SIGTERM/SIGINT (``torchrun`` forwards one to every rank) stops each rank at a safe point
    with its rows kept: a rank in a batch after the batch, a rank at a barrier when a peer
    stopped (exit 143/130, and no merged table); one that comes once every part is whole lets
    the merge finish.

    Args:
        generator: Each rank's generator (on its own device).
        rows: The full dataset (every rank passes all rows; sharding is by prompt key).
        out_path: The merged table file.
        **kwargs: The other arguments of ``estimate_values`` (``reward_funcs``, ``config``,
            ``provenance``, ...), except ``shard``.

    Returns:
        The merged ``ValueTable``.
    """
    if "shard" in kwargs:
        raise ValueError("estimate_values_by_rank chooses the shard from the rank; drop `shard`.")
    info = init_distributed()
    if not info.distributed:
        return estimate_values(generator, rows, out_path=out_path, **kwargs)
    # One context over the shard, the waits and the merge: a SIGTERM/SIGINT between them is
    # recorded, not the default action (a rank gone without a word, a torn gloo pair).
    with StopSignals("the wait for the other ranks' shards and the merge") as signals:
        estimate_values(
            generator, rows, out_path=out_path, shard=(info.rank, info.world_size), **kwargs
        )  # stops by itself (rows kept) on a signal during its batches
        _barrier_or_stop(signals)
        if info.is_main:
            merge_shards(out_path, info.world_size, rows)
        _barrier_or_stop(signals)
    config = kwargs.get("config")
    return ValueTable.load(out_path, drop_all_wrong=bool(config and config.filter_all_wrong))


def _barrier_or_stop(signals: StopSignals) -> None:
    """Wait for every rank; a peer that stopped on a signal stops this rank the same way.

    A peer gone during the wait fails the collective here. If this rank has (or, within 5 s,
    gets) a SIGTERM/SIGINT too, the peer stopped on the preemption both received: this rank
    stops as at a batch (exit 143/130, its rows kept). Otherwise the failure is re-raised.
    """
    try:
        barrier()
    except Exception:
        if signals.wait(5.0):
            signals.stop("in Stage 1 while waiting for the other ranks: rerun to resume.")
        raise
