"""What the LLM tests share instead of rebuilding it by hand: the tiny model's shape and builder,
a quick trainer config, and the one trainer factory (plain functions, so that spawned workers
can call them too; the fixtures of ``tests/conftest.py`` wrap them)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

# The smallest Qwen2 shape the LLM tests use (overrides of ``make_toy_model``).
TINY = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
}

# What every test run of the trainer turns off: the progress bar and the trackers.
QUIET = {"progress": False, "report_to": "none"}

# The config fields of a quick toy run (toy_trainer's defaults; any field overrides them).
QUICK_RUN = {
    "max_steps": 2,
    "batch_size": 4,
    "max_new_tokens": 3,
    "learning_rate": 1e-3,
    "save_steps": 1,
    "seed": 1,
}


def make_tiny_model(tokenizer: Any, seed: int = 0, **overrides: Any) -> Any:
    """A fresh toy model of the :data:`TINY` shape (``overrides`` change any field)."""
    from astarpo.llm.models.toy import make_toy_model

    return make_toy_model(tokenizer, seed=seed, **{**TINY, **overrides})


def tiny_qwen(seed: int = 0, **overrides: Any) -> Any:
    """A bare ``Qwen2ForCausalLM`` of the :data:`TINY` shape and 32 tokens, in eval mode, after
    ``torch.manual_seed(seed)`` (no tokenizer; ``overrides`` change any ``Qwen2Config`` field)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    return Qwen2ForCausalLM(Qwen2Config(**{"vocab_size": 32, **TINY, **overrides})).eval()


def quick_config(output_dir: str | Path, cls: Any = None, /, **fields: Any) -> Any:
    """``cls`` (default ``AStarPOConfig``) writing to ``output_dir``, :data:`QUIET`, and
    ``fields`` (which may override any of them, ``output_dir`` included)."""
    if cls is None:
        from astarpo.llm.algorithms.astarpo import AStarPOConfig

        cls = AStarPOConfig
    return cls(**{"output_dir": str(output_dir), **QUIET, **fields})


def first_digit_reward(prompts: Any, completions: Any, answer: Any, **_: Any) -> list[float]:
    """Dense enough for a random model: 1 when the first character is right."""
    return [1.0 if c[:1] == a[:1] else 0.0 for c, a in zip(completions, answer, strict=True)]


def addition_rows(n: int = 8) -> list[dict[str, str]]:
    """``n`` addition problems of seed 0 (``{"problem", "answer", "prompt"}``)."""
    from astarpo.llm.toy.problems import addition_task

    return addition_task(n, seed=0)


def spread_table(rows: Any) -> dict[str, float]:
    """A V* table of 0, 0.05, ..., 0.2 in turn over ``rows``: advantages that differ per prompt."""
    return {r["prompt"]: 0.05 * (i % 5) for i, r in enumerate(rows)}


# A run of 8 prompts per step in 2 minibatches (the trainer tests that compare runs).
TWO_MINIBATCHES = {
    "max_steps": 4,
    "batch_size": 8,
    "minibatches": 2,
    "max_new_tokens": 4,
    "learning_rate": 3e-3,
    "save_steps": 2,
}


def comparison_run(**fields: Any) -> dict[str, Any]:
    """:func:`toy_trainer`'s keywords for the trainer tests that compare runs: 24 addition
    prompts with :func:`spread_table` values, ``first_digit_reward`` and ``exact_match_reward``,
    a separate fresh reference, :data:`TWO_MINIBATCHES`; ``fields`` override any of them."""
    from astarpo.llm.rewards.builtin import exact_match_reward

    rows = addition_rows(24)
    return {
        "rows": rows,
        "table": spread_table(rows),
        "rewards": [first_digit_reward, exact_match_reward],
        "fresh_ref": True,
        **TWO_MINIBATCHES,
        **fields,
    }


def toy_trainer(
    tokenizer: Any,
    out: str | Path,
    /,
    *,
    rows: Any = None,
    table: Any = ...,
    rewards: Any = None,
    model: Any = None,
    ref: Any = None,
    fresh_ref: bool = False,
    cls: Any = None,
    trainer: Any = None,
    **options: Any,
) -> Any:
    """The tests' one trainer: a fresh tiny model on addition rows, writing to ``out``.

    Args:
        tokenizer: The character tokenizer (the ``tokenizer`` fixture; ``None``: a new one).
        out: The run's ``output_dir``.
        rows: ``train_dataset`` (default :func:`addition_rows` ``(8)``).
        table: The V* table (default: 0.1 for each default row's prompt; ``None``: none).
        rewards: The reward functions (default ``[first_digit_reward]``).
        model: The policy (default a fresh :func:`make_tiny_model`).
        ref: The reference (default ``None``: the trainer's frozen copy of the policy).
        fresh_ref: Give a second fresh tiny model as the reference instead.
        cls: The config class (default ``AStarPOConfig``).
        trainer: The trainer class (default ``AStarPOTrainer``).
        **options: ``Trainer`` keywords (``eval_fn``, ``callbacks``, ``algorithm``,
            ``generator``, ``processing_class``) and config fields over :data:`QUICK_RUN` and
            :data:`QUIET`.
    """
    from astarpo.llm.models.toy import make_char_tokenizer
    from astarpo.llm.training.trainer import Trainer
    from astarpo.llm.training.trainers import AStarPOTrainer

    tokenizer = tokenizer if tokenizer is not None else make_char_tokenizer()
    given = {"self", "model", "ref_model", "reward_funcs", "args", "train_dataset"}
    given |= {"v_star_table", "tokenizer"}
    keywords = set(inspect.signature(Trainer.__init__).parameters) - given
    kwargs = {k: options.pop(k) for k in list(options) if k in keywords}
    if rows is None:
        rows = addition_rows()
    if table is ...:
        table = {r["prompt"]: 0.1 for r in addition_rows()}
    return (trainer or AStarPOTrainer)(
        model if model is not None else make_tiny_model(tokenizer),
        make_tiny_model(tokenizer) if fresh_ref else ref,
        list(rewards) if rewards is not None else [first_digit_reward],
        args=quick_config(out, cls, **{**QUICK_RUN, **options}),
        train_dataset=rows,
        v_star_table=table,
        tokenizer=tokenizer,
        **kwargs,
    )


def spread_reward(completions: Any, **_: Any) -> list[float]:
    """A reward in [0, 1) that differs between most responses (V* then depends on each one)."""
    return [sum(map(ord, c)) % 7 / 7 for c in completions]


def hand_v_star(
    model: Any, tokenizer: Any, cfg: Any, batch_size: int, rows: Any, rewards: Any
) -> Any:
    """V* of each row under ``model`` as :func:`~astarpo.llm.stage1.estimate.estimate_values`
    samples it with the Stage 1 config ``cfg`` (batches of ``prompts_per_call`` unique prompts in
    row order, seeds from their keys), the rewards ``rewards`` (reward functions taking
    ``prompts``, ``completions``, ``answer``) summed, and ``beta1 log mean exp(r / beta1)``
    written out in float64."""
    import numpy as np

    from astarpo.llm.data.prompts import prompt_key
    from astarpo.llm.rollout.base import derive_seed
    from astarpo.llm.rollout.hf import HFGenerator

    gen = HFGenerator(model, tokenizer, batch_size=batch_size)
    unique = list({prompt_key(r["prompt"]): r for r in rows}.items())
    values = {}
    for i in range(0, len(unique), cfg.prompts_per_call):
        batch = unique[i : i + cfg.prompts_per_call]
        prompts = [r["prompt"] for _, r in batch]
        seed = derive_seed(cfg.seed, *(k for k, _ in batch))
        out = gen.generate(prompts, cfg.n_samples, cfg.sampling, seed)
        answers = [r["answer"] for _, r in batch for _ in range(cfg.n_samples)]
        total = np.zeros(len(out.completions))
        for f in rewards:
            kw = {"prompts": out.prompts, "completions": out.completions, "answer": answers}
            total += np.asarray(f(**kw), dtype=np.float64)
        for p, r in zip(prompts, total.reshape(len(batch), cfg.n_samples), strict=True):
            b1 = float(cfg.beta1)
            values[p] = b1 * np.log(np.mean(np.exp(r / b1)))
    return np.array([values[r["prompt"]] for r in rows])
