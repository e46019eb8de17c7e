"""``astarpo value``: Stage 1 (sample N reference responses per prompt, write the V* table).

Three modes:

* ``astarpo value --model DIR --data FILE --out values.jsonl``: estimate (resumable; with
  ``--shard i/k`` only shard i, written to ``values.part-i-of-k.jsonl``);
* ``astarpo value --merge K --out values.jsonl [--data FILE]``: merge the K part files;
* ``astarpo value --import-official FILE --out values.jsonl``: convert an official A*-PO
  dataset (columns ``eval_0`` .. ``eval_{N-1}``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from astarpo.commands.common import (
    add_data_arguments,
    add_generation_arguments,
    add_model_arguments,
    add_reward_arguments,
    build_rewards,
    load_model,
    load_prompts_from_args,
    load_tokenizer,
    make_generator,
    needs_hf_model,
    refuse_existing,
)
from astarpo.llm.models.fit import check_model_fits, check_prompts_fit, max_positions
from astarpo.llm.parallel.dist import DEFAULT_DIST_TIMEOUT, init_distributed
from astarpo.llm.rollout.base import SamplingConfig
from astarpo.llm.stage1.estimate import estimate_values, estimate_values_by_rank
from astarpo.llm.stage1.shards import merge_shards, parse_shard, part_path
from astarpo.llm.stage1.table import ValueTable


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``astarpo value``."""
    parser.add_argument("--out", required=True, help="the V* table file (.jsonl; or .parquet)")
    parser.add_argument(
        "--data",
        help="prompts: a .jsonl, .json or .parquet file, a Dataset.save_to_disk folder, or "
        "hf:NAME[:CONFIG]:SPLIT (a hub dataset, downloaded only when named)",
    )
    add_model_arguments(parser)
    add_data_arguments(parser)
    add_reward_arguments(parser)
    parser.add_argument("--n-samples", type=int, default=8, help="N responses per prompt (8)")
    parser.add_argument("--beta1", type=float, default=0.5, help="KL strength of V* (0.5)")
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=256,
        help="per response (256, as training's default: training refuses a table sampled with "
        "another budget)",
    )
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (1)")
    parser.add_argument("--top-p", type=float, default=1.0, help="nucleus mass (1 = off)")
    parser.add_argument("--seed", type=int, default=0, help="base seed (0)")
    parser.add_argument(
        "--prompts-per-call",
        type=int,
        default=8,
        help="prompts per generate call (8); keep it when resuming. (--batch-size means "
        "prompts per optimizer step, on `astarpo train` and `astarpo bench`.)",
    )
    parser.add_argument(
        "--shard",
        help="'i/k': only shard i of k; 'auto': RANK/WORLD_SIZE. Under torchrun without "
        "--shard, each rank takes its shard and rank 0 merges the parts into --out.",
    )
    add_generation_arguments(parser, gpu_memory_utilization=0.9)  # Stage 1 runs alone
    parser.add_argument(
        "--dist-timeout",
        type=float,
        default=DEFAULT_DIST_TIMEOUT,
        help="under torchrun: collectives (the barrier before rank 0 merges the parts) time out "
        f"after twice this many seconds (default {DEFAULT_DIST_TIMEOUT:g})",
    )
    parser.add_argument("--merge", type=int, metavar="K", help="merge the K part files of --out")
    parser.add_argument(
        "--import-official", metavar="FILE", help="convert an official eval_0..eval_{N-1} dataset"
    )
    parser.add_argument(
        "--export",
        metavar="DIR",
        help="also write the finished table as a datasets folder (the training data with "
        "v_star, pass_rate and rewards columns; what the official scripts and the TRL forks "
        "read; `astarpo train --v-star DIR` reads it too)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="let --merge/--import-official replace an existing --out (estimation resumes it)",
    )


def check_merge_template(args: argparse.Namespace) -> None:
    """Refuse ``--merge --data`` whose ``--template`` differs from the one the shards recorded:
    the prompts would differ, and every one would look missing from the parts.

    Raises:
        SystemExit: naming both templates and the flag to pass.
    """
    part = part_path(args.out, 0, args.merge)
    if not args.data or not part.is_file():
        return  # merge_shards names a missing part
    made = {r.provenance.get("template") for r in ValueTable.load(part)} - {None}
    if len(made) == 1 and args.template not in made:
        (template,) = made
        raise SystemExit(
            f"error: the shards were made with --template {template!r} ({part}), but --merge "
            f"loads --data with --template {args.template!r}, which gives other prompts; pass "
            f"--template {template!r} (and the shards' other prompt flags)."
        )


def run(args: argparse.Namespace) -> int:
    """Run Stage 1, a merge or an import; print a one-line summary."""

    def rows_of_data() -> list[dict] | None:
        if not args.data:
            return None
        tokenizer = None
        if args.chat_template or args.max_prompt_tokens:
            tokenizer = load_tokenizer(args.model)
        return load_prompts_from_args(args, args.data, tokenizer)

    quiet = False
    if args.export and Path(args.export).exists():  # refused before any sampling
        raise SystemExit(f"error: --export {args.export!r} exists; choose a new folder.")
    if args.import_official or args.merge:
        refuse_existing(args.out, args.overwrite)
    if args.import_official:
        tok = None
        if args.chat_template:
            tok = load_tokenizer(args.model)
        table = ValueTable.from_official(
            args.import_official, beta1=args.beta1, tokenizer=tok, chat_template=args.chat_template
        )
        table.save(args.out)
    elif args.merge:
        check_merge_template(args)
        table = merge_shards(args.out, args.merge, rows_of_data())
    else:
        if not args.data:
            raise SystemExit(
                "error: --data is required to estimate V* (or use --merge/--import-official)."
            )
        if args.temperature == 0 and args.n_samples > 1:
            raise SystemExit(
                f"error: --temperature 0 (greedy) gives {args.n_samples} identical samples per "
                "prompt, so V* would be one reward; use --temperature > 0, or --n-samples 1."
            )
        # Under torchrun: one process group, one GPU per rank.
        dist_info = init_distributed(dist_timeout=args.dist_timeout)
        if needs_hf_model(args):
            model, tokenizer = load_model(args.model, args.device, args.dtype)
        else:  # vLLM loads the saved model itself
            model, tokenizer = None, load_tokenizer(args.model)
        generator = make_generator(args, model, tokenizer)
        rows = load_prompts_from_args(args, args.data, tokenizer)
        if model is not None:  # data the model cannot read or fit is refused before sampling
            try:
                check_model_fits(rows, tokenizer, model, args.max_new_tokens, args.data)
            except ValueError as e:
                raise SystemExit(f"error: {e}") from e
            check_prompts_fit(rows, tokenizer, max_positions(model), args.max_new_tokens, args.data)
        rewards = build_rewards(args.reward, args.math_verify_timeout, "math_verify")
        stage1: Any = estimate_values
        shard = parse_shard(args.shard)
        if shard is None and dist_info.distributed:
            stage1 = estimate_values_by_rank
            quiet = not dist_info.is_main  # every rank returns the merged table: print once
        table = stage1(
            generator,
            rows,
            reward_funcs=rewards,
            n_samples=args.n_samples,
            beta1=args.beta1,
            sampling=SamplingConfig(args.max_new_tokens, args.temperature, args.top_p),
            out_path=args.out,
            seed=args.seed,
            batch_size=args.prompts_per_call,
            **({"shard": shard} if shard is not None else {}),
            provenance={"model": args.model, "data": args.data, "template": args.template},
            progress=not args.no_progress,
            reward_timeout=args.reward_timeout,
        )
    if quiet:
        return 0
    if args.export:
        table.export(args.export)
        print(f"exported {len(table)} rows to {args.export} (datasets.load_from_disk)")
    v = table.v_star([r.prompt for r in table]) if len(table) else np.zeros(0)
    wrong = sum(r.pass_rate == 0 for r in table)
    print(
        f"V* table {table.path}: {len(table)} prompts, mean V* {v.mean() if len(v) else 0:.4f}, "
        f"mean pass rate {np.mean([r.pass_rate for r in table]) if len(table) else 0:.4f}, "
        f"all-wrong prompts {wrong}"
    )
    return 0
