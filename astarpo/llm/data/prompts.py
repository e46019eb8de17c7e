r"""Prompt sets: read JSONL/Parquet files, apply the paper's prompt templates, key prompts.

A loaded row is a plain dict with at least

* ``prompt``: the final text fed to the model (template and optional chat template applied),
* ``problem``: the raw problem text from the file,
* ``answer``: the gold answer (for GSM8K, the number after ``####``),

so that it can be passed to a :class:`~astarpo.llm.rollout.hf.Generator` (``prompt``) and to
reward functions as a column (``answer``). :func:`prompt_key` names a prompt in a V* table.

Templates (``{problem}`` is replaced by the problem text, everything else is kept literally):

* ``"math"``: ``{problem} Let's think step by step and output the final answer within \boxed{}.``
* ``"gsm8k"``: ``{problem} Let's think step by step and output the final answer after "####".``
* ``"none"``: ``{problem}`` unchanged.
* any other string containing ``{problem}``: a custom template.
* ``"auto"`` (default): ``"gsm8k"`` when every gold answer is a GSM8K solution (``#### n``),
  ``"none"`` when every problem already contains an instruction with ``\boxed`` (the packaged
  benchmark files end with "Please reason step by step, and put your final answer within
  \boxed{}.") or the file is in the official A*-PO/verl chat format, else ``"math"``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from astarpo.llm.data.files import read_located_records

__all__ = [
    "TEMPLATES",
    "apply_template",
    "benchmark_path",
    "chat_messages",
    "extract_gsm8k_answer",
    "filter_prompt_length",
    "load_prompts",
    "prompt_key",
    "read_records",
    "repeat_columns",
]

logger = logging.getLogger(__name__)

TEMPLATES: dict[str, str] = {
    "math": "{problem} Let's think step by step and output the final answer within \\boxed{}.",
    "gsm8k": '{problem} Let\'s think step by step and output the final answer after "####".',
    "none": "{problem}",
}

PROBLEM_KEYS = ("problem", "question", "prompt", "query", "input", "instruction")
ANSWER_KEYS = ("answer", "final_answer", "ground_truth", "solution", "target", "output")
_GSM8K_LINE = re.compile(r"^\s*####\s*(.+?)\s*$", re.MULTILINE)


def prompt_key(text: str) -> str:
    """Stable key of a prompt: the SHA-256 hex digest of its exact UTF-8 text (64 chars)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def extract_gsm8k_answer(solution: str) -> str | None:
    """The gold number of a GSM8K solution: the text after its last ``####``, commas removed.

    Returns ``None`` when there is no ``####`` line.
    """
    matches = _GSM8K_LINE.findall(solution)
    return matches[-1].replace(",", "").strip() if matches else None


def apply_template(problem: str, template: str) -> str:
    """``template`` (a name in :data:`TEMPLATES` or a string with ``{problem}``) applied.

    Raises:
        ValueError: if a custom template lacks ``{problem}``.
    """
    fmt = TEMPLATES.get(template, template)
    if "{problem}" not in fmt:
        raise ValueError(
            f"template {template!r} is neither one of {sorted(TEMPLATES)} nor a string "
            "containing '{problem}'."
        )
    return fmt.replace("{problem}", problem)


def chat_messages(text: str, system_prompt: str | None = None) -> list[dict[str, str]]:
    """The chat messages of a templated prompt: ``text`` as the user message, after
    ``system_prompt`` as a system message when given (what ``load_prompts(chat_template=True)``
    renders with the tokenizer's chat template, and what verl's parquet ``prompt`` holds)."""
    msgs = [{"role": "system", "content": system_prompt}] if system_prompt else []
    msgs.append({"role": "user", "content": text})
    return msgs


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Rows of a ``.jsonl``, ``.json`` (list of objects) or ``.parquet`` file, of a folder saved
    with ``datasets.Dataset.save_to_disk``, or of a hub dataset ``"hf:NAME[:CONFIG]:SPLIT"``
    (see :func:`~astarpo.llm.data.hub.read_hf_dataset`), as dicts.

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: on a line that is not valid UTF-8 or not a JSON object (file and line
            named) or an unknown extension.
    """
    return [rec for _, rec in read_located_records(path)]


def _chat_messages(value: Any) -> list[dict[str, str]] | None:
    if isinstance(value, list) and value and all(isinstance(m, dict) for m in value):
        if all("content" in m for m in value):
            return [dict(m) for m in value]
    return None


def _pick(
    row: dict[str, Any], key: str | None, candidates: Sequence[str], what: str, where: str
) -> str:
    if key is not None:
        if key not in row:
            raise KeyError(f"{where}: {what} column {key!r} not found; the row has {sorted(row)}.")
        return key
    for k in candidates:
        if k in row:
            return k
    raise KeyError(
        f"{where}: no {what} column found among {sorted(row)}; expected one of "
        f"{list(candidates)} or pass {what}_key=..."
    )


def _is_official(row: dict[str, Any]) -> bool:
    rm = row.get("reward_model")
    return isinstance(rm, dict) and "ground_truth" in rm


def _check_limit(limit: Any) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(
            f"limit must be a whole number >= 1 (keep the first N rows) or None (all rows), "
            f"got {limit!r}; a negative limit would drop rows from the end."
        )


def load_prompts(
    path: str | os.PathLike[str],
    template: str = "auto",
    *,
    problem_key: str | None = None,
    answer_key: str | None = None,
    answer_format: str = "auto",
    tokenizer: Any = None,
    chat_template: bool = False,
    system_prompt: str | None = None,
    max_prompt_tokens: int | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Load prompts and gold answers from a JSONL, JSON or Parquet file.

    Args:
        path: The data file.
        template: ``"auto"``, ``"math"``, ``"gsm8k"``, ``"none"`` or a custom string with
            ``{problem}`` (see the module docstring). Applied verbatim: the packaged benchmark
            problems already end with an instruction, so ``"math"`` would add a second one;
            ``"auto"`` picks ``"none"`` for them.
        problem_key: Column of the problem (default: the first of ``problem``, ``question``,
            ``prompt``, ``query``, ``input``, ``instruction``). A column holding a list of chat
            messages (official A*-PO/verl files) uses its last user message.
        answer_key: Column of the gold answer (default: ``reward_model.ground_truth`` when
            present, else the first of ``answer``, ``final_answer``, ``ground_truth``,
            ``solution``, ``target``, ``output``).
        answer_format: ``"auto"`` (GSM8K solutions ending in ``#### n`` become ``n``, others are
            kept), ``"gsm8k"`` (require ``#### n``) or ``"raw"`` (keep as is). The full text is
            kept in ``solution`` when it was shortened.
        tokenizer: A ``transformers`` tokenizer; needed for ``chat_template`` and
            ``max_prompt_tokens``.
        chat_template: Wrap the templated problem as a user message (after ``system_prompt``
            if given) with ``tokenizer.apply_chat_template(..., add_generation_prompt=True)``.
            Default False (plain text, as in the paper's base-model runs).
        system_prompt: Optional system message for the chat template.
        max_prompt_tokens: Drop prompts longer than this many tokens (the count of dropped rows
            is logged; use :func:`filter_prompt_length` to get it). Default None (keep all).
        limit: Keep only the first ``limit`` rows of the file (before filtering); >= 1.

    Returns:
        Rows ``{"prompt", "problem", "answer"}`` (+ ``"solution"`` when the answer was
        extracted), in file order.

    Raises:
        FileNotFoundError, KeyError, ValueError: with the file, column or row at fault (or
            the argument: a ``limit`` below 1).
    """
    if answer_format not in ("auto", "gsm8k", "raw"):
        raise ValueError(f"answer_format must be 'auto', 'gsm8k' or 'raw', got {answer_format!r}.")
    if (chat_template or max_prompt_tokens is not None) and tokenizer is None:
        raise ValueError("chat_template and max_prompt_tokens need a tokenizer=...")
    _check_limit(limit)
    located = read_located_records(path)
    if limit is not None:
        located = located[:limit]
    rows: list[dict[str, Any]] = []
    official = bool(located) and all(_is_official(r) for _, r in located)
    for where, rec in located:
        pk = _pick(rec, problem_key, PROBLEM_KEYS, "problem", where)
        raw_problem = rec[pk]
        messages = _chat_messages(raw_problem)
        if messages is not None:
            users = [m for m in messages if m.get("role", "user") == "user"]
            problem = str((users or messages)[-1]["content"])
        elif isinstance(raw_problem, str):
            problem = raw_problem
        else:
            raise ValueError(f"{where}: problem column {pk!r} is not text.")
        if not problem.strip():
            raise ValueError(f"{where}: the problem ({pk!r}) is empty; fill it in or drop the row.")
        if answer_key is None and _is_official(rec):
            ak, gold_raw = "reward_model.ground_truth", rec["reward_model"]["ground_truth"]
        else:
            ak = _pick(rec, answer_key, ANSWER_KEYS, "answer", where)
            gold_raw = rec[ak]
        if gold_raw is None:
            raise ValueError(
                f"{where}: the answer ({ak!r}) is null; every row needs a gold answer (a null "
                "would be scored as the text 'None'). Fill it in or drop the row."
            )
        gold = str(gold_raw)
        row: dict[str, Any] = {"problem": problem}
        if answer_format != "raw":
            num = extract_gsm8k_answer(gold)
            if num is None and answer_format == "gsm8k":
                raise ValueError(f"{where}: answer has no '#### n' line: {gold[:80]!r}")
            if num is not None:
                row["solution"], gold = gold, num
        row["answer"] = gold
        rows.append(row)
    tmpl = template
    if template == "auto":
        if rows and all("solution" in r for r in rows):
            tmpl = "gsm8k"
        elif official or (rows and all("\\boxed" in r["problem"] for r in rows)):
            tmpl = "none"
        else:
            tmpl = "math"
    for row in rows:
        text = apply_template(row["problem"], tmpl)
        if chat_template:
            msgs = chat_messages(text, system_prompt)
            text = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        row["prompt"] = text
    if max_prompt_tokens is not None:
        rows, dropped = filter_prompt_length(rows, tokenizer, max_prompt_tokens)
        if dropped:
            logger.warning(
                "%s: dropped %d of %d prompts longer than %d tokens.",
                path,
                dropped,
                len(rows) + dropped,
                max_prompt_tokens,
            )
    return rows


def filter_prompt_length(
    rows: Sequence[dict[str, Any]], tokenizer: Any, max_prompt_tokens: int
) -> tuple[list[dict[str, Any]], int]:
    """Rows whose ``prompt`` has at most ``max_prompt_tokens`` tokens, and how many were dropped.

    Tokens are counted with ``tokenizer(prompt, add_special_tokens=False)``.
    """
    if max_prompt_tokens < 1:
        raise ValueError(f"max_prompt_tokens must be >= 1, got {max_prompt_tokens}.")
    kept = [
        r
        for r in rows
        if len(tokenizer(r["prompt"], add_special_tokens=False)["input_ids"]) <= max_prompt_tokens
    ]
    return kept, len(rows) - len(kept)


def benchmark_path(name: str) -> Path:
    """The packaged evaluation file ``name`` (e.g. ``"math500.jsonl"``), from the installed
    package (:mod:`importlib.resources`), so it is found from any working directory.

    The files and their provenance are listed in ``astarpo/llm/data/benchmarks/README.md``.

    Raises:
        FileNotFoundError: naming the file and the packaged ones.
    """
    folder = resources.files("astarpo.llm.data") / "benchmarks"
    entry = folder / name
    if not entry.is_file():
        known = sorted(e.name for e in folder.iterdir() if e.name.endswith(".jsonl"))
        raise FileNotFoundError(f"no packaged benchmark file {name!r}; the package has {known}.")
    return Path(str(entry))  # a regular file: setuptools installs package data unzipped


def repeat_columns(rows: Sequence[Mapping[str, Any]], n: int) -> dict[str, list[Any]]:
    """The reward columns of ``rows`` repeated for ``n`` samples each, prompt-major.

    The one place that lines dataset columns up with the rows of a rollout (row ``i * n + j``
    is sample ``j`` of prompt ``i``). Columns are those every row has, except ``prompt``.

    Args:
        rows: Dataset rows ``[P]``.
        n: Samples per prompt.

    Returns:
        ``{column: [P * n values]}``, columns sorted by name.
    """
    if not rows:
        return {}
    cols = set.intersection(*(set(r) for r in rows)) - {"prompt"}
    return {c: [r[c] for r in rows for _ in range(n)] for c in sorted(cols)}
