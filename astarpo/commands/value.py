"""``astarpo value``: Stage 1 (sample N reference responses per prompt, write the V* table).

Three modes:

* ``astarpo value --model DIR --data FILE --out values.jsonl``: estimate (resumable; with
  ``--shard i/k`` only shard i, written to ``values.part-i-of-k.jsonl``);
* ``astarpo value --merge K --out values.jsonl [--data FILE]``: merge the K part files;
* ``astarpo value --import-official FILE --out values.jsonl``: convert an official A*-PO
  dataset (columns ``eval_0`` .. ``eval_{N-1}``);
* ``astarpo value --export-verl train.parquet --out values.jsonl --data FILE --model DIR
  --chat-template``: nothing is sampled; the finished table ``--out`` is checked against the
  run verl will do (``--model``, ``--reward``, the sampling flags, the prompts and answers of
  ``--data``), as ``astarpo train`` checks it, and written as verl's training parquet with
  ``extra_info.v_star`` (:mod:`astarpo.llm.stage1.verl_export`).
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
from astarpo.config import add_field_arguments, field_values, name_flags, parse_bool
from astarpo.llm.data.prompts import chat_messages, filter_prompt_length
from astarpo.llm.parallel.dist import DEFAULT_DIST_TIMEOUT, init_distributed
from astarpo.llm.rewards.scoring import reward_path
from astarpo.llm.stage1.config import Stage1Config
from astarpo.llm.stage1.estimate import estimate_values, estimate_values_by_rank
from astarpo.llm.stage1.provenance import check_table_fits, model_name
from astarpo.llm.stage1.shards import merge_shards, parse_shard, part_path
from astarpo.llm.stage1.table import ValueTable
from astarpo.llm.stage1.verl_export import verl_records, write_verl_parquet

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
    verl = parser.add_argument_group("verl's training data (--export-verl)")
    verl.add_argument(
        "--export-verl",
        metavar="FILE",
        help="nothing is sampled: check the finished table --out against --model, --reward, the "
        "sampling flags and --data (with --chat-template: verl renders every prompt with the "
        "chat template), then write verl's training parquet with extra_info.v_star",
    )
    verl.add_argument(
        "--data-source",
        default="lighteval/MATH",
        help="data_source of every verl row (verl's default reward dispatches on it; default "
        "lighteval/MATH, its boxed-answer math scorer)",
    )
    verl.add_argument(
        "--allow-v-star-mismatch",
        type=parse_bool,
        default=False,
        help="export a table whose provenance (model, rewards, sampling, answers) differs from "
        "the flags (default false: refused, as `astarpo train` refuses it)",
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


def export_verl(args: argparse.Namespace) -> int:
    """``--export-verl``: check the finished table ``--out`` against the flags of the verl run
    (as the trainer checks a table) and write verl's training parquet; nothing is sampled.

    Raises:
        SystemExit: a usage error (no ``--data``, no ``--chat-template``, a table that does not
            fit, a prompt missing from it).
    """
    if args.merge or args.import_official or args.export:
        raise SystemExit("error: --export-verl reads a finished --out; give it alone.")
    if not args.data:
        raise SystemExit("error: --export-verl needs --data (the training prompts and answers).")
    if not args.chat_template:
        raise SystemExit(
            "error: --export-verl needs --chat-template: verl renders every prompt with the "
            "tokenizer's chat template, so V* must come from Stage 1 on the chat-formatted "
            "prompts (run `astarpo value ... --chat-template` and pass the same flags here)."
        )
    check_output(args.export_verl, "--export-verl", folder=False, new=True)
    tokenizer = load_tokenizer(args.model)
    config = stage1_config(args)
    plain = argparse.Namespace(**{**vars(args), "chat_template": False, "max_prompt_tokens": None})
    rows = load_prompts_from_args(plain, args.data, tokenizer)  # the user text of each prompt
    for row in rows:
        row["messages"] = chat_messages(row["prompt"], args.system_prompt)
        row["prompt"] = tokenizer.apply_chat_template(
            row["messages"], tokenize=False, add_generation_prompt=True
        )
    if args.max_prompt_tokens is not None:  # counted on the chat-formatted text, as Stage 1 does
        rows, _ = filter_prompt_length(rows, tokenizer, args.max_prompt_tokens)
    table = ValueTable.load(args.out)
    rewards = build_rewards(args.reward, args.math_verify_timeout, "math_verify")
    sampling = {k: getattr(config, k) for k in ("max_new_tokens", "temperature", "top_p")}
    try:
        for warning in check_table_fits(
            table,
            reward_paths=[reward_path(f) for f in rewards],
            rows=rows,
            model=model_name(args.model),
            sampling=sampling,
            allow_mismatch=args.allow_v_star_mismatch,
        ):
            print(f"warning: {warning}")
        records = verl_records(
            table, rows, data_source=args.data_source, drop_all_wrong=config.filter_all_wrong
        )
    except (ValueError, KeyError) as e:  # ValueTableError, MissingPromptError
        raise SystemExit(f"error: {e}") from e
    write_verl_parquet(records, args.export_verl)
    print(
        f"verl data {args.export_verl}: {len(records)} of {len(rows)} prompts, V* in "
        f"extra_info.v_star (from {table.path}), data_source {args.data_source!r}"
    )
    return 0


def run(args: argparse.Namespace) -> int:
    """Run Stage 1, a merge, an import or the verl export; print a one-line summary."""
    if args.export_verl:
        return export_verl(args)

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
