"""Peak memory of one A*-PO-style training step: separate reference copy vs LoRA reference.

Modes: ``full+copy`` (full fine-tuning, a frozen deep copy as reference), ``lora+copy`` (LoRA
policy, a frozen copy of the base) and ``lora`` (LoRA policy, the reference the same model with
adapters disabled): ``lora`` vs ``lora+copy`` is the saving of no second copy, ``full+copy``
adds LoRA's optimizer-state saving. Each mode runs in a fresh subprocess: a Qwen2-style model
from a config (no download), its reference, one step (policy forward, reference forward under
``no_grad``, backward, AdamW). Reported: the weights' bytes (``parameter_bytes``) and the peak:
on CPU the growth of the peak RSS (``ru_maxrss``) over that after imports, on CUDA
``torch.cuda.max_memory_allocated``.

    python -m experiments.benchmarks.lora_memory                    # CPU, ~23M-parameter model
    python -m experiments.benchmarks.lora_memory --device cuda --hidden 1024 --layers 16
"""

from __future__ import annotations

import argparse
import json
import sys

from experiments.benchmarks import common


def _step(args: argparse.Namespace) -> dict:
    """One step of mode ``args.child`` (see the module doc)."""
    import copy
    import resource

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from astarpo.llm import AdapterDisabledReference, apply_lora, parameter_bytes

    def rss_peak_bytes() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux

    mode, device, hidden = args.child, args.device, args.hidden
    torch.manual_seed(0)
    start = rss_peak_bytes()
    shape = dict(
        hidden_size=hidden, num_hidden_layers=args.layers, intermediate_size=hidden * 11 // 4
    )
    config = Qwen2Config(vocab_size=256, num_attention_heads=8, num_key_value_heads=2, **shape)
    policy = Qwen2ForCausalLM(config).to(device)
    if mode != "lora":  # a frozen deep copy of the base
        ref = copy.deepcopy(policy).eval().requires_grad_(False)
    if mode != "full+copy":
        policy = apply_lora(policy, r=16, seed=0)
    if mode == "lora":  # the same model with its adapters disabled
        ref = AdapterDisabledReference(policy)
    weights = parameter_bytes(policy, ref)
    opt = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-4)
    ids = torch.randint(0, 256, (args.batch, args.seq), device=device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    logits = policy(input_ids=ids).logits
    with torch.no_grad():
        ref_logits = ref(input_ids=ids).logits
    loss = ((logits - ref_logits).float() ** 2).mean()
    loss.backward()
    opt.step()
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else rss_peak_bytes() - start
    return {"mode": mode, "weights_bytes": weights, "peak_bytes": peak}


def main() -> None:
    doc = __doc__.splitlines()[0]
    parser = common.parser(doc, device="cpu", hidden=512, layers=8, batch=4, seq=64)
    parser.add_argument("--modes", default="full+copy,lora+copy,lora", help="comma-separated")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON line")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_step(args)))
        return
    cmd = [sys.executable, __file__, *sys.argv[1:], "--child"]  # the same sizes
    results = {m: common.child_result([*cmd, m], f"mode {m}") for m in args.modes.split(",")}
    if args.json:
        print(json.dumps(results))
        return
    mib = 2.0**20
    print(f"device={args.device} hidden={args.hidden} layers={args.layers}")
    for mode, r in results.items():
        weights, peak = r["weights_bytes"] / mib, r["peak_bytes"] / mib
        print(f"{mode:>9}: weights {weights:8.1f} MiB, peak {peak:8.1f} MiB")
    for other in [m for m in ("lora+copy", "full+copy") if m in results and "lora" in results]:
        w, p = (results["lora"][k] / results[other][k] for k in ("weights_bytes", "peak_bytes"))
        print(f"lora / {other}: weights {w:.3f}, peak {p:.3f}")


if __name__ == "__main__":
    main()
