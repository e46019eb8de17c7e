"""``astarpo train``: Stage 2 training (A*-PO; the baselines plug into the same command).

Example::

    astarpo value --model DIR --data train.jsonl --out v_star.jsonl      # Stage 1
    astarpo train --model DIR --data train.jsonl --v-star v_star.jsonl --out runs/a \\
        --batch-size 64 --learning-rate 1e-6 --beta2 1e-3

Every field of the algorithm's config is a flag (``--batch-size``, ``--beta2``, ...; see
``astarpo train --help``). ``--resume`` continues from the latest checkpoint in ``--out``.

Adding an algorithm: put one entry in :data:`ALGORITHMS`, ``name -> ("module:ConfigClass",
"module:factory")``, where the config class is a frozen dataclass subclassing
:class:`~astarpo.llm.config.TrainConfig` (kept light to import: no torch at module top) and
``factory(config)`` returns an :class:`~astarpo.llm.algorithm.Algorithm`. Its new fields become
flags automatically; flags of other algorithms are rejected with a clear error.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from astarpo.commands._model import add_data_arguments, add_model_arguments, add_reward_arguments

#: Algorithm name -> (config class, factory building the algorithm from the config).
ALGORITHMS: dict[str, tuple[str, str]] = {
    "astarpo": ("astarpo.llm.config:AStarPOConfig", "astarpo.llm.algorithm:AStarPO.from_config"),
    "grpo": ("astarpo.llm.baseline_config:GRPOConfig", "astarpo.llm.baselines:GRPO.from_config"),
    "rloo": ("astarpo.llm.baseline_config:RLOOConfig", "astarpo.llm.baselines:RLOO.from_config"),
    "ppo": ("astarpo.llm.baseline_config:PPOConfig", "astarpo.llm.baselines:PPO.from_config"),
    "rebel": (
        "astarpo.llm.baseline_config:REBELConfig",
        "astarpo.llm.baselines:REBEL.from_config",
    ),
}

# Config fields set by other flags of the command.
_OWN = {"output_dir": "--out", "device": "--device", "generation_batch_size": "--gen-batch-size"}
# Shorter names of config-field flags, shared with `astarpo value` and `astarpo eval`.
_ALIASES = {
    "generation_backend": "--backend",
    "vllm_gpu_memory_utilization": "--gpu-memory-utilization",
}


def _resolve(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _config_fields() -> dict[str, tuple[Any, str, set[str]]]:
    """Every config field of every algorithm: name -> (default, help, algorithms having it)."""
    from astarpo.llm.config import config_fields

    out: dict[str, tuple[Any, str, set[str]]] = {}
    for algo, (cfg_spec, _) in ALGORITHMS.items():
        for name, default, help_text in config_fields(_resolve(cfg_spec)):
            if name in out:
                out[name][2].add(algo)
            else:
                out[name] = (default, help_text, {algo})
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``astarpo train``: model, data, rewards, V* table, and one flag per field."""
    parser.add_argument("--algo", default="astarpo", choices=sorted(ALGORITHMS), help="algorithm")
    parser.add_argument("--data", help="training prompts (.jsonl, .json or .parquet)")
    parser.add_argument("--v-star", help="the Stage 1 V* table (from `astarpo value`)")
    parser.add_argument("--out", required=True, help="output directory (metrics, checkpoints)")
    parser.add_argument(
        "--ref-model", help="reference model directory (default: --model, loaded again)"
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue from the latest checkpoint in --out"
    )
    add_model_arguments(parser)
    add_data_arguments(parser)
    add_reward_arguments(parser)
    group = parser.add_argument_group("training config (defaults of the chosen --algo)")
    for name, (default, help_text, algos) in _config_fields().items():
        if name in _OWN:
            continue
        flag = "--" + name.replace("_", "-")
        where = "" if len(algos) == len(ALGORITHMS) else f" [{', '.join(sorted(algos))}]"
        text = f"{help_text} (default {default}){where}".replace("%", "%%")
        flags = [_ALIASES[name], flag] if name in _ALIASES else [flag]
        if isinstance(default, bool):
            group.add_argument(
                *flags, dest=name, type=_bool, default=None, metavar="BOOL", help=text
            )
        else:
            group.add_argument(*flags, dest=name, type=type(default), default=None, help=text)


def _bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def run(args: argparse.Namespace) -> int:
    """Load the model, data and V* table, train, save the final model; print a summary."""
    import json
    from pathlib import Path

    from astarpo.commands._model import build_rewards, load_model, load_prompts_from_args
    from astarpo.llm.config import config_fields
    from astarpo.llm.trainer import Trainer

    cfg_cls = _resolve(ALGORITHMS[args.algo][0])
    factory = _resolve(ALGORITHMS[args.algo][1])
    own = {f for f, *_ in config_fields(cfg_cls)}
    values: dict[str, Any] = {"output_dir": args.out, "device": args.device}
    values["generation_batch_size"] = args.gen_batch_size
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
        cfg = cfg_cls(**values)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from e
    algorithm = factory(cfg)
    if not args.data:
        raise SystemExit("error: --data is required (a .jsonl, .json or .parquet prompt file).")
    from astarpo.llm.distributed import init_distributed

    dist_info = init_distributed()  # under torchrun: "cuda" is now this rank's GPU
    dtype = "float32" if args.dtype == "auto" else args.dtype
    model, tokenizer = load_model(args.model, args.device, dtype)
    ref = None
    if algorithm.needs_reference and not cfg.lora_r:  # LoRA: the reference is the base model
        ref, _ = load_model(args.ref_model or args.model, args.device, args.dtype)
    if hasattr(algorithm, "attach_critic"):  # PPO: the critic starts as a copy of the reference
        algorithm.attach_critic(ref if ref is not None else model)
    rows = load_prompts_from_args(args, args.data, tokenizer)
    table = None
    if algorithm.needs_v_star:
        if not args.v_star:
            raise SystemExit(f"error: --algo {args.algo} needs --v-star (run `astarpo value`).")
        from astarpo.llm.value import ValueTable

        table = ValueTable.load(args.v_star)
    rewards = build_rewards(args.reward, args.reward_timeout, default="math_verify")
    trainer = Trainer(model, ref, rewards, algorithm, cfg, rows, table, tokenizer)
    history = trainer.train(resume=args.resume)
    from astarpo.llm.data_parallel import save_final_model

    # Written once (rank 0); FSDP2 shards gathered, LoRA adapters merged.
    final = save_final_model(trainer.model, tokenizer, Path(args.out) / "final")
    last: dict[str, Any] = next((r for r in reversed(history) if "loss" in r), {})
    keys = ("step", "reward/mean", "loss", "kl", "time/train_total")
    if dist_info.is_main:
        print(json.dumps({k: last.get(k) for k in keys} | {"final_model": str(final)}))
    return 0
