"""Provenance of a V* table, and the check that a table fits the run that trains on it.

Every row of a table written by Stage 1 records how it was made: the reward functions' full
dotted paths (``reward_path``), ``beta1``, ``n_samples`` (N), the model, the sampling settings,
the seed and a fingerprint of the prompt set (``data``, :func:`data_fingerprint`). A table whose
rows disagree on those fields mixes two runs and is refused (:func:`table_provenance`).
Training compares them with its own run (:func:`check_table_fits`: model, rewards, sampling,
and every training prompt present with the same answer) and refuses a mismatch unless told to
accept it (``allow_v_star_mismatch``). Training on a subset of the table's prompts is no mismatch.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from astarpo.llm.data.prompts import prompt_key
from astarpo.llm.models.gguf import gguf_file
from astarpo.llm.models.loading import TOY
from astarpo.llm.stage1.rows import ValueTableError
from astarpo.llm.stage1.table import ValueTable

__all__ = [
    "MATCHING",
    "check_table_fits",
    "data_fingerprint",
    "model_name",
    "same_model",
    "table_provenance",
]

MATCHING = (
    "model",
    "n_samples",
    "beta1",
    "sampling",
    "reward",
    "reward_path",
    "data",
    "seed",
    "batch_size",
    "allocation",
)
"""Provenance fields every row of one table shares (a resumed or merged Stage 1 must match)."""


def data_fingerprint(rows: Sequence[Mapping[str, Any]]) -> str:
    """SHA-256 of the set of ``(prompt, answer)`` pairs of ``rows`` (order and duplicates do not
    matter), so Stage 1 and Stage 2 on the same prompt file agree."""
    pairs = sorted({(prompt_key(str(r["prompt"])), str(r.get("answer"))) for r in rows})
    return hashlib.sha256(json.dumps(pairs).encode("utf-8")).hexdigest()


def table_provenance(table: ValueTable) -> dict[str, Any]:
    """The provenance fields of :data:`MATCHING` shared by every row of ``table``.

    Raises:
        ValueTableError: two rows disagree (the table mixes two Stage 1 runs), naming the field.
    """
    shared: dict[str, Any] | None = None
    first = ""
    for row in table:
        sig = {k: row.provenance.get(k) for k in MATCHING}
        if shared is None:
            shared, first = sig, row.prompt
            continue
        diff = [k for k in MATCHING if sig[k] != shared[k]]
        if diff:
            raise ValueTableError(
                f"V* table {table.path or '(in memory)'} mixes Stage 1 runs: prompt "
                f"{row.prompt[:60]!r} differs from {first[:60]!r} in {', '.join(diff)} "
                f"({', '.join(f'{shared[k]!r} vs {sig[k]!r}' for k in diff)}). Recompute it "
                "with one `astarpo value` run."
            )
    return shared or {}


def same_model(a: str, b: str) -> bool:
    """Whether two model names are the same (local directories and files compared by resolved
    path, GGUF checkpoints by the file they name)."""
    if a == b:
        return True
    if (os.path.isdir(a) and os.path.isdir(b)) or (os.path.isfile(a) and os.path.isfile(b)):
        return Path(a).resolve() == Path(b).resolve()
    return _gguf_name(a) is not None and _gguf_name(a) == _gguf_name(b)


def _gguf_name(name: str) -> str | None:
    """The absolute path of the GGUF file ``name`` names, or None (also when it cannot be
    resolved: a packaged name not installed here)."""
    try:
        path = gguf_file(name)
    except (OSError, ValueError):
        return None
    return str(path) if path is not None else None


def model_name(model: Any) -> str | None:
    """The name a table records for ``model``: the string itself (``"toy"``, a hub id, or a local
    directory as its absolute path, so that a run started from another directory can check it;
    a GGUF checkpoint, however named, as the absolute path of its file), else an object's
    ``config._name_or_path`` (what ``from_pretrained`` sets; the file's path for a model loaded
    from a GGUF file); None when unknown."""
    if model is None:
        return None
    if isinstance(model, (str, os.PathLike)):
        name = str(model)
    else:
        name = str(getattr(getattr(model, "config", None), "_name_or_path", "") or "")
    if not name or name == TOY:
        return name or None
    gguf = _gguf_name(name)
    if gguf is not None:
        return gguf
    return str(Path(name).resolve()) if os.path.isdir(name) else name


def _row_problems(table: ValueTable, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Training rows whose gold answer differs from the one the table's row was scored with."""
    problems = []
    for r in rows:
        answer = r.get("answer")
        if answer is None:
            continue
        old = table.get(str(r["prompt"])).answer  # MissingPromptError names a missing prompt
        if old is not None and str(old) != str(answer):
            short = str(r["prompt"])[:60]
            problems.append(f"answer of prompt {short!r}: table {old!r}, training {answer!r}")
            break
    return problems


def check_table_fits(
    table: ValueTable,
    *,
    reward_paths: Sequence[str] | None = None,
    rows: Sequence[Mapping[str, Any]] | None = None,
    model: str | None = None,
    sampling: Mapping[str, Any] | None = None,
    allow_mismatch: bool = False,
) -> list[str]:
    """Check the provenance of ``table`` against the training run.

    The data check is a *subset* rule: every training prompt must have its row in the table
    (a missing prompt is always refused, by name: its V* is unknown), and a training row's gold
    answer must be the one the table's row was scored with. A training set that is a subset of
    the table's prompts (the paper's all-wrong filter, a curriculum, a train/validation split)
    fits without any override.

    Args:
        table: The Stage 1 table.
        reward_paths: The training rewards' dotted paths (:func:`~astarpo.llm.rewards.scoring.
            reward_path`); ``None`` skips the check.
        rows: The training rows (``prompt``, optional ``answer``); ``None`` skips the check.
        model: The reference model of training (:func:`model_name`); ``None`` skips it.
        sampling: Training's sampling settings (``max_new_tokens``, ``temperature``, ``top_p``);
            each one the table records must match. ``None`` skips the check.
        allow_mismatch: Return the mismatches (reward, model, answers, sampling) as warnings
            instead of raising. A missing prompt is refused even then.

    Returns:
        Warnings: fields the table does not record (not checked), and the mismatches when
        ``allow_mismatch``.

    Raises:
        ValueTableError: a mismatch (each field named), or rows that mix two runs.
        MissingPromptError: a training prompt has no row in the table (named).
    """
    prov = table_provenance(table)
    name = table.path or "(in memory)"
    wanted = {"reward_path": reward_paths, "model": model}
    problems, unchecked = [], []
    for key, now in wanted.items():
        if now is None:
            continue
        old = prov.get(key)
        if old is None or (key == "model" and old == "unknown"):  # sampled by a bare generator
            unchecked.append(key)
        elif key == "model" and same_model(str(old), str(now)):
            continue
        elif json.loads(json.dumps(old)) != json.loads(json.dumps(now)):
            problems.append(f"{key}: table {old!r}, training {now!r}")
    if sampling is not None:
        old_sampling = prov.get("sampling")
        if not isinstance(old_sampling, Mapping):
            unchecked.append("sampling")
        else:
            for key, now in sampling.items():
                if key in old_sampling and float(old_sampling[key]) != float(now):
                    old = old_sampling[key]
                    problems.append(f"sampling {key}: table {old!r}, training {now!r}")
    if rows is not None:
        problems += _row_problems(table, rows)
    warnings = [f"V* table {name} records no {', '.join(unchecked)}; not checked."] * bool(
        unchecked
    )
    if problems and not allow_mismatch:
        raise ValueTableError(
            f"V* table {name} was made for another run ({'; '.join(problems)}). Recompute it "
            "with `astarpo value` on the training data, reward, reference model and sampling "
            "settings, or accept it with --allow-v-star-mismatch true (allow_v_star_mismatch=True)."
        )
    return warnings + [f"V* table {name} mismatch accepted: {p}" for p in problems]
