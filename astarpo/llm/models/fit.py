"""Data the model cannot read, refused when the data is loaded, before any generation.

:func:`check_model_fits` refuses characters the tokenizer maps to its unknown token. A prompt
of ``n`` tokens with ``max_new_tokens`` to generate needs ``n + max_new_tokens`` positions;
past the model's ``max_position_embeddings`` generation fails late (or, on CPU, runs out of
memory). :func:`check_prompts_fit` names how many prompts are too long, which ones, and how to
drop them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "check_model_fits",
    "check_prompts_fit",
    "check_sampling_fits",
    "max_positions",
    "prompt_token_ids",
    "unknown_token_id",
]


def max_positions(model: Any) -> int | None:
    """``model.config.max_position_embeddings`` (``None`` when the model does not say)."""
    n = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return int(n) if isinstance(n, int) and n > 0 else None


def prompt_token_ids(rows: Sequence[Mapping[str, Any]], tokenizer: Any) -> list[list[int]]:
    """The token ids of every ``row["prompt"]`` (no special tokens), ``[B][L_i]``, from one
    batched tokenizer call: what the checks below share, so a dataset is tokenized once."""
    if not rows:
        return []
    ids: list[list[int]] = tokenizer([str(r["prompt"]) for r in rows], add_special_tokens=False)[
        "input_ids"
    ]
    return ids


def check_prompts_fit(
    rows: Sequence[Mapping[str, Any]],
    tokenizer: Any,
    limit: int | None,
    max_new_tokens: int,
    where: str,
    *,
    prompt_ids: Sequence[Sequence[int]] | None = None,
) -> None:
    """Raise unless every ``row["prompt"]`` plus ``max_new_tokens`` fits in ``limit`` positions.

    Args:
        rows: Rows with a ``prompt``.
        tokenizer: The model's tokenizer (tokens counted without special tokens).
        limit: The model's positions (:func:`max_positions`); ``None`` skips the check.
        max_new_tokens: Tokens to generate per response.
        where: The data's name in the error (file or argument).
        prompt_ids: The prompts' token ids (:func:`prompt_token_ids`), when already computed.

    Raises:
        ValueError: naming how many prompts are too long, the first ones, and the fixes.
    """
    if limit is None or not rows:
        return
    if max_new_tokens >= limit:
        raise ValueError(
            f"max_new_tokens ({max_new_tokens}) leaves no room for a prompt in the model's "
            f"{limit} positions; lower it."
        )
    ids = prompt_ids if prompt_ids is not None else prompt_token_ids(rows, tokenizer)
    bad = [(i, len(x)) for i, x in enumerate(ids) if len(x) + max_new_tokens > limit]
    if bad:
        first = ", ".join(f"row {i} ({n} tokens)" for i, n in bad[:3])
        raise ValueError(
            f"{where}: {len(bad)} of {len(rows)} prompts do not fit the model: prompt tokens + "
            f"max_new_tokens ({max_new_tokens}) exceed its {limit} positions ({first}"
            f"{', ...' if len(bad) > 3 else ''}). Drop them with --max-prompt-tokens "
            f"{limit - max_new_tokens} (max_prompt_tokens=), or lower --max-new-tokens; nothing "
            "was generated."
        )


def unknown_token_id(tokenizer: Any) -> int | None:
    """The id ordinary text becomes when the tokenizer cannot encode it, or ``None`` (no unknown
    token, or a GPT-2 style one that is the EOS text and never produced by ordinary text)."""
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None or unk == getattr(tokenizer, "eos_token_id", None):
        return None
    return int(unk)


def check_model_fits(
    rows: Sequence[Mapping[str, Any]],
    tokenizer: Any,
    what: str = "train_dataset",
    *,
    prompt_ids: Sequence[Sequence[int]] | None = None,
) -> None:
    """Refuse data the model cannot read, before any sampling: characters its tokenizer maps
    to the unknown token (in ``prompt`` or a text ``answer``). Prompts too long for the model's
    positions are refused by :func:`check_prompts_fit`.

    Without it the embedded toy model (a 44-character vocabulary, 64 positions) would train
    silently on V* = 0 and loss = 0 on, say, MATH prompts.

    The prompts are tokenized in one batched call (or ``prompt_ids`` of
    :func:`prompt_token_ids` reused) and the text answers in another, not one call per row.

    Raises:
        ValueError: naming the first offending row, the characters and the fix.
    """
    unk = unknown_token_id(tokenizer)
    if unk is None or not rows:
        return
    ids = prompt_ids if prompt_ids is not None else prompt_token_ids(rows, tokenizer)
    bad_prompt = next((i for i, p_ids in enumerate(ids) if unk in p_ids), None)
    answers = [(i, r.get("answer")) for i, r in enumerate(rows)]
    answers = [(i, a) for i, a in answers if isinstance(a, str)]
    bad_answer = None
    if answers:
        answer_ids = tokenizer([a for _, a in answers], add_special_tokens=False)["input_ids"]
        pairs = zip(answers, answer_ids, strict=True)
        bad_answer = next((i for (i, _), a_ids in pairs if unk in a_ids), None)
    if bad_prompt is not None and (bad_answer is None or bad_prompt <= bad_answer):
        i, field = bad_prompt, "prompt"  # a row's prompt is named before its answer
    elif bad_answer is not None:
        i, field = bad_answer, "answer"
    else:
        return
    text = str(rows[i][field])
    bad = sorted({c for c in text if unk in tokenizer(c, add_special_tokens=False)["input_ids"]})
    raise ValueError(
        f"{what} row {i}: the tokenizer cannot encode the characters {''.join(bad)!r} "
        f"of its {field} ({text[:60]!r}); they would all become "
        f"{tokenizer.unk_token!r}. Use data over the tokenizer's alphabet (the toy "
        "model knows digits, + - * / = ( ) . , : ? space and a-z) or a real model."
    )


def check_sampling_fits(
    rows: Sequence[Mapping[str, Any]],
    tokenizer: Any,
    model: Any,
    max_new_tokens: int,
    where: str,
) -> None:
    """Both checks before sampling from ``model``: :func:`check_model_fits` (characters the
    tokenizer cannot encode) and :func:`check_prompts_fit` (prompt tokens + ``max_new_tokens``
    within the model's positions; a DDP wrapper is looked through), on prompts tokenized once.

    Raises:
        ValueError: see the two checks; ``where`` names the data.
    """
    limit = max_positions(getattr(model, "module", model))
    needed = rows and (unknown_token_id(tokenizer) is not None or limit is not None)
    ids = prompt_token_ids(rows, tokenizer) if needed else None
    check_model_fits(rows, tokenizer, where, prompt_ids=ids)
    check_prompts_fit(rows, tokenizer, limit, max_new_tokens, where, prompt_ids=ids)
