"""``astarpo train``: Stage 2 training (A*-PO; the baselines plug into the same command).

Example::

    astarpo value --model DIR --data train.jsonl --out v_star.jsonl      # Stage 1
    astarpo train --model DIR --data train.jsonl --v-star v_star.jsonl --out runs/a \\
        --batch-size 64 --learning-rate 1e-6 --beta2 1e-3

Every field of the algorithm's config is a flag (``--batch-size``, ``--beta2``, ...; see
``astarpo train --help``), and so is every setting of the trainer extensions (``--refresh-*``,
``--stream-*``; :mod:`astarpo.commands.train_extensions`). ``--resume`` continues from the
latest checkpoint in ``--out``; a run stopped by SIGTERM or SIGINT names the command that
continues it.

``--algo`` lists the algorithms of :data:`~astarpo.llm.algorithms.registry.ALGORITHMS`; a new
algorithm registered there gets its config fields as flags automatically, and flags of other
algorithms are rejected with a clear error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
from collections.abc import Sequence
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
from astarpo.commands.fields import NotAnOption
from astarpo.commands.paths import check_output
from astarpo.commands.train_extensions import add_extension_arguments, build_extensions
from astarpo.config import add_field_arguments, field_values, flag_of, name_flags
from astarpo.llm.algorithms.registry import ALGORITHMS
from astarpo.llm.parallel.dist import init_distributed
from astarpo.llm.parallel.signals import Interrupted
from astarpo.llm.stage1.table import ValueTable
from astarpo.llm.training.trainer import Trainer

# Config fields set by other flags of the command.
_OWN = {"output_dir": "--out", "device": "--device", "overwrite_output_dir": "--overwrite"}
#: The algorithm whose flags ``astarpo train`` takes when ``--algo`` is not given.
DEFAULT_ALGO = "astarpo"


def add_arguments(parser: argparse.ArgumentParser, algo: str = DEFAULT_ALGO) -> None:
    """Options of ``astarpo train``: model, data, rewards, V* table, and one flag per field of
    the config of ``algo`` (:func:`astarpo.cli.main` reads ``--algo`` before building the
    parser). The fields of the other algorithms are
    :class:`~astarpo.commands.fields.NotAnOption` flags: refused by name."""
    algos = "; ".join(f"{name}: {spec.summary}" for name, spec in ALGORITHMS.items())
    parser.add_argument(
        "--algo",
        default=DEFAULT_ALGO,
        choices=list(ALGORITHMS),
        help=f"algorithm (default {DEFAULT_ALGO}) -- {algos}".replace("%", "%%"),
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
    spec = ALGORITHMS.get(algo, ALGORITHMS[DEFAULT_ALGO])  # a bad --algo: argparse says so
    name = algo if algo in ALGORITHMS else DEFAULT_ALGO
    config = spec.config.__name__
    group = parser.add_argument_group(
        f"training config of --algo {name} ({config}); `astarpo train --algo NAME --help` "
        "lists another algorithm's"
    )
    add_field_arguments(group, spec.config, skip=_OWN)
    add_extension_arguments(parser, name, spec.algorithm.needs_v_star)
    parser.set_defaults(_fields_of=name)
    own = {f.name for f in dataclasses.fields(spec.config)}
    owners: dict[str, list[str]] = {}
    for other, other_spec in ALGORITHMS.items():
        for f in dataclasses.fields(other_spec.config):
            if f.name not in own:
                owners.setdefault(f.name, []).append(other)
    for field_name, algos_of in owners.items():
        reason = (
            f"does not apply to --algo {name} ({config}); it is an option of --algo "
            f"{', '.join(algos_of)} (see astarpo train --algo {name} --help)"
        )
        parser.add_argument(flag_of(field_name), action=NotAnOption, reason=reason)


def run(args: argparse.Namespace) -> int:
    """Load the model, data and V* table, train, save the final model; print a summary."""
    spec = ALGORITHMS[args.algo]
    if args.algo != args._fields_of:  # e.g. an abbreviated --alg the pre-scan did not see
        raise SystemExit(f"error: spell out --algo {args.algo} (its flags were not loaded).")
    values: dict[str, Any] = {
        "output_dir": args.out,
        "device": args.device,
        "overwrite_output_dir": args.overwrite,
        **field_values(spec.config, args, skip=_OWN),
    }
    try:
        cfg = spec.config(**values)
    except ValueError as e:  # named by flag, as `astarpo value` does
        raise SystemExit(f"error: {name_flags(str(e), spec.config, _OWN)}") from e
    extensions = build_extensions(args, cfg)
    streamed = any(ext.provides_values for ext in extensions)  # V* estimated during training
    if not args.data:
        raise SystemExit(
            "error: --data is required (a prompt file, a save_to_disk folder or hf:NAME:SPLIT)."
        )
    if args.resume and args.overwrite:
        raise SystemExit("error: --resume and --overwrite exclude each other; choose one.")
    check_output(args.out, "--out", folder=True)  # before the model is loaded
    # Under torchrun: "cuda" is now this rank's GPU; collectives time out after 2 x dist_timeout.
    dist_info = init_distributed(dist_timeout=cfg.dist_timeout)
    dtype = "float32" if args.dtype == "auto" else args.dtype
    model, tokenizer = load_model(args.model, args.device, dtype)
    ref = None  # the trainer copies the policy when the algorithm needs a reference
    if args.ref_model:
        ref, _ = load_model(args.ref_model, args.device, dtype)
    rows = load_prompts_from_args(args, args.data, tokenizer)
    table = None
    if spec.algorithm.needs_v_star and not streamed:
        if not args.v_star:
            raise SystemExit(
                f"error: --algo {args.algo} needs --v-star (run `astarpo value`), or "
                "--stream-stage1 to estimate V* during training."
            )
        table = ValueTable.load(args.v_star)  # the trainer checks its provenance
    elif args.v_star and streamed:
        raise SystemExit("error: --stream-stage1 estimates V* during training; drop --v-star.")
    rewards = build_rewards(args.reward, args.math_verify_timeout, default="math_verify")
    trainer = Trainer(
        model,
        ref,
        rewards,
        args=cfg,
        train_dataset=rows,
        v_star_table=table,
        tokenizer=tokenizer,
        extensions=extensions,
    )
    # Raises (nothing saved) on a non-finite step; also writes OUT/final (Trainer.save_model).
    try:
        history = trainer.train(resume=args.resume)
    except Interrupted as e:  # stopped at a safe point: say how to continue
        again = resume_command(getattr(args, "_argv", None), dist_info.distributed)
        raise Interrupted(e.signum, f"{e} To continue: {again}") from e
    final = Path(args.out) / "final"
    last: dict[str, Any] = next((r for r in reversed(history) if "loss" in r), {})
    keys = ("step", "reward/mean", "loss", "kl", "time/train_total")
    if dist_info.is_main:
        summary = {k: last.get(k) for k in keys} | {"final_model": str(final)}
        print(json.dumps(summary, allow_nan=False))
    return 0


def resume_command(argv: Sequence[str] | None, distributed: bool) -> str:
    """The command that continues a stopped run: this one (``argv``, the verb's arguments)
    with ``--resume`` (and without ``--overwrite``, which would delete what it continues);
    under ``torchrun`` the launch command cannot be known, so it says to add ``--resume``."""
    if argv is None or distributed:
        return "rerun the same command with --resume (without --overwrite)."
    kept = [a for a in argv if a not in ("--overwrite", "--resume")]
    return shlex.join(["astarpo", *kept, "--resume"])
