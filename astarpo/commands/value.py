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
from astarpo.commands.paths import check_output
from astarpo.config import add_field_arguments, field_values, name_flags
from astarpo.llm.parallel.dist import DEFAULT_DIST_TIMEOUT, init_distributed
from astarpo.llm.stage1.config import Stage1Config
from astarpo.llm.stage1.estimate import estimate_values, estimate_values_by_rank
from astarpo.llm.stage1.shards import merge_shards, parse_shard, part_path
from astarpo.llm.stage1.table import ValueTable

# Stage1Config fields set by another flag of the command.
_OWN = {"progress": "--no-progress"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``astarpo value``: one flag per field of
    :class:`~astarpo.llm.stage1.config.Stage1Config`, and the model, data, reward and
    generation flags."""
    parser.add_argument("--out", required=True, help="the V* table file (.jsonl; or .parquet)")
    parser.add_argument(
        "--data",
        help="prompts: a .jsonl, .json or .parquet file, a Dataset.save_to_disk folder, or "
        "hf:NAME[:CONFIG]:SPLIT (a hub dataset, downloaded only when named)",
    )
    add_model_arguments(parser)
    add_data_arguments(parser)
    add_reward_arguments(parser, deadline=False)  # --reward-timeout is a Stage1Config field
    group = parser.add_argument_group("Stage 1 config (Stage1Config)")
    add_field_arguments(group, Stage1Config, skip=_OWN)
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
    parser.add_argument(
        "--no-progress", action="store_true", help="hide the progress bar (Stage1Config.progress)"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="let --merge/--import-official replace an existing --out (estimation resumes it)",
    )


def stage1_config(args: argparse.Namespace) -> Stage1Config:
    """The :class:`~astarpo.llm.stage1.config.Stage1Config` of the command line.

    Raises:
        SystemExit: a usage error naming the flag of the invalid field.
    """
    try:
        return Stage1Config(
            **field_values(Stage1Config, args, skip=_OWN), progress=not args.no_progress
        )
    except ValueError as e:
        raise SystemExit(f"error: {name_flags(str(e), Stage1Config)}") from e


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
    check_output(args.out, "--out", folder=False)  # refused before any sampling
    check_output(args.export, "--export", folder=True, new=True)
    if args.import_official or args.merge:
        refuse_existing(args.out, args.overwrite)
    if args.import_official:
        tok = None
        if args.chat_template:
            tok = load_tokenizer(args.model)
        table = ValueTable.from_official(
            args.import_official,
            beta1=stage1_config(args).beta1,
            tokenizer=tok,
            chat_template=args.chat_template,
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
        config = stage1_config(args)  # refused before any model is loaded
        # Under torchrun: one process group, one GPU per rank.
        dist_info = init_distributed(dist_timeout=args.dist_timeout)
        if needs_hf_model(args):
            model, tokenizer = load_model(args.model, args.device, args.dtype)
        else:  # vLLM loads the saved model itself
            model, tokenizer = None, load_tokenizer(args.model)
        generator = make_generator(args, model, tokenizer)
        rows = load_prompts_from_args(args, args.data, tokenizer)
        # estimate_values refuses data the model cannot read or fit before any sampling.
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
            config=config,
            out_path=args.out,
            **({"shard": shard} if shard is not None else {}),
            provenance={"model": args.model, "data": args.data, "template": args.template},
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
