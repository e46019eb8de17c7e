"""``astarpo train``: Stage 2 training (A*-PO; the baselines plug into the same command).

Example::

    astarpo value --model DIR --data train.jsonl --out v_star.jsonl      # Stage 1
    astarpo train --model DIR --data train.jsonl --v-star v_star.jsonl --out runs/a \\
        --batch-size 64 --learning-rate 1e-6 --beta2 1e-3

Every field of the algorithm's config is a flag (``--batch-size``, ``--beta2``, ...; see
``astarpo train --help``). ``--resume`` continues from the latest checkpoint in ``--out``.

``--algo`` lists the algorithms of :data:`~astarpo.llm.algorithms.registry.ALGORITHMS`; a new
algorithm registered there gets its config fields as flags automatically, and flags of other
algorithms are rejected with a clear error.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from astarpo.commands.common import (
    add_data_arguments,
    add_model_arguments,
    add_reward_arguments,
    build_rewards,
    load_model,
    load_prompts_from_args,
)
from astarpo.llm.algorithms.config import config_fields
from astarpo.llm.algorithms.registry import ALGORITHMS
from astarpo.llm.parallel.dist import init_distributed
from astarpo.llm.stage1.table import ValueTable
from astarpo.llm.training.trainer import Trainer

# Config fields set by other flags of the command.
_OWN = {"output_dir": "--out", "device": "--device", "overwrite_output_dir": "--overwrite"}


def _config_fields() -> dict[str, tuple[Any, str, set[str]]]:
    """Every config field of every algorithm: name -> (default, help, algorithms having it)."""
    out: dict[str, tuple[Any, str, set[str]]] = {}
    for algo, spec in ALGORITHMS.items():
        for name, default, help_text in config_fields(spec.config):
            if name in out:
                out[name][2].add(algo)
            else:
                out[name] = (default, help_text, {algo})
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``astarpo train``: model, data, rewards, V* table, and one flag per field."""
    algos = "; ".join(f"{name}: {spec.summary}" for name, spec in ALGORITHMS.items())
    parser.add_argument(
        "--algo",
        default="astarpo",
        choices=list(ALGORITHMS),
        help=f"algorithm (default astarpo) -- {algos}".replace("%", "%%"),
    )
    parser.add_argument(
        "--data",
        help="training prompts: a .jsonl, .json or .parquet file, a Dataset.save_to_disk "
        "folder, or hf:NAME[:CONFIG]:SPLIT (a hub dataset, downloaded only when named)",
    )
    parser.add_argument(
        "--v-star",
        help="the Stage 1 V* table (from `astarpo value`): a .jsonl/.parquet file or a folder "
        "from `astarpo value --export`",
    )
    parser.add_argument("--out", required=True, help="output directory (metrics, checkpoints)")
    parser.add_argument(
        "--ref-model",
        help="reference model directory (default: a frozen copy of --model, when the algorithm "
        "needs one; with LoRA the adapter-disabled policy)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue from the latest checkpoint in --out (refused when a setting that changes "
        "the result differs from the run it continues)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="start over in a non-empty --out, deleting its checkpoints, metrics and final model",
    )
    add_model_arguments(parser)
    add_data_arguments(parser)
    add_reward_arguments(parser, deadline=False)  # --reward-timeout is a config field
    group = parser.add_argument_group("training config (defaults of the chosen --algo)")
    for name, (default, help_text, owners) in _config_fields().items():
        if name in _OWN:
            continue
        flag = "--" + name.replace("_", "-")
        where = "" if len(owners) == len(ALGORITHMS) else f" [{', '.join(sorted(owners))}]"
        text = f"{help_text} (default {default}){where}".replace("%", "%%")
        if isinstance(default, bool):
            group.add_argument(flag, type=_bool, default=None, metavar="BOOL", help=text)
        else:
            group.add_argument(flag, type=type(default), default=None, help=text)


def _bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def run(args: argparse.Namespace) -> int:
    """Load the model, data and V* table, train, save the final model; print a summary."""
    spec = ALGORITHMS[args.algo]
    own = {f for f, *_ in config_fields(spec.config)}
    values: dict[str, Any] = {
        "output_dir": args.out,
        "device": args.device,
        "overwrite_output_dir": args.overwrite,
    }
    for name in _config_fields():
        if name in _OWN:
            continue
        v = getattr(args, name, None)
        if v is None:
            continue
        if name not in own:
            raise SystemExit(
                f"error: --{name.replace('_', '-')} does not apply to --algo {args.algo}."
            )
        values[name] = v
    try:
        cfg = spec.config(**values)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from e
    if not args.data:
        raise SystemExit(
            "error: --data is required (a prompt file, a save_to_disk folder or hf:NAME:SPLIT)."
        )
    if args.resume and args.overwrite:
        raise SystemExit("error: --resume and --overwrite exclude each other; choose one.")
    # Under torchrun: "cuda" is now this rank's GPU; collectives time out after 2 x dist_timeout.
    dist_info = init_distributed(dist_timeout=cfg.dist_timeout)
    dtype = "float32" if args.dtype == "auto" else args.dtype
    model, tokenizer = load_model(args.model, args.device, dtype)
    ref = None  # the trainer copies the policy when the algorithm needs a reference
    if args.ref_model:
        ref, _ = load_model(args.ref_model, args.device, dtype)
    rows = load_prompts_from_args(args, args.data, tokenizer)
    table = None
    if spec.algorithm.needs_v_star:
        if not args.v_star:
            raise SystemExit(f"error: --algo {args.algo} needs --v-star (run `astarpo value`).")
        table = ValueTable.load(args.v_star)  # the trainer checks its provenance
    rewards = build_rewards(args.reward, args.math_verify_timeout, default="math_verify")
    trainer = Trainer(
        model, ref, rewards, args=cfg, train_dataset=rows, v_star_table=table, tokenizer=tokenizer
    )
    # Raises (nothing saved) on a non-finite step; also writes OUT/final (Trainer.save_model).
    history = trainer.train(resume=args.resume)
    final = Path(args.out) / "final"
    last: dict[str, Any] = next((r for r in reversed(history) if "loss" in r), {})
    keys = ("step", "reward/mean", "loss", "kl", "time/train_total")
    if dist_info.is_main:
        summary = {k: last.get(k) for k in keys} | {"final_model": str(final)}
        print(json.dumps(summary, allow_nan=False))
    return 0
