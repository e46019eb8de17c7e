"""Does the quick ladder fill its bins under a reference fine-tuned otherwise?

A reference fine-tuned on another machine (or from another seed) reaches the same check accuracy
by another path, and can be much stronger on the ladder's rare patterns, so that a bin of
``python -m experiments.ladder --quick`` (and of the adaptive-N and refresh studies' quick
ladders) holds too few candidates. This script fine-tunes the ladder's reference from each seed
of ``--sft-seeds`` (the SFT data order; from the cache when there), draws the quick ladder's
candidates with their exact v_ref (its search rounds included: :func:`~experiments.harness.
ladder_build.draw_for`) and prints, per bin, how many fell in it against the train + test
prompts it keeps, and the search rounds used of the quick ladder's ``top_ups``; exit code 1 when
a bin is short. With ``--studies DIR`` it then runs the three quick studies built on that ladder
(``ladder``, ``adaptive-n``, ``refresh``, each ``--quick``) with the same reference into
``DIR/STUDY_sSEED`` and prints each one's wall time; exit code 1 when one fails. Run from the
repository root::

    python -m experiments.benchmarks.ladder_fill --sft-seeds 1,2,3 [--cache-dir DIR] [--studies DIR]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from astarpo.llm import make_char_tokenizer
from experiments.harness.ladder_build import draw_for
from experiments.harness.ladder_sets import QUICK, LadderConfig, bin_label, parse_bin
from experiments.harness.protocol import make_reference


def fill(seed: int, cache_dir: str | None, quiet: bool = True) -> dict[str, Any]:
    """The quick ladder's fill under the reference of SFT seed ``seed``: ``sft`` (its steps and
    check accuracy), ``candidates``, ``rounds`` (search rounds used), per bin label ``found``
    and ``need``, ``ok``, ``seconds``."""
    cfg = LadderConfig.from_dict(QUICK)
    sft = replace(cfg.protocol.sft, seed=seed)
    protocol = replace(cfg.protocol, sft=sft, cache_dir=cache_dir).resolved()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        ref, info = make_reference(protocol, Path(tmp))
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        if not quiet:
            print(line, flush=True)

    candidates, logp = draw_for(replace(cfg, protocol=protocol), ref, make_char_tokenizer(), say)
    log10, need = logp / math.log(10.0), cfg.train + cfg.test
    bins = {}
    for spec in cfg.bins:
        hi, lo = parse_bin(spec)
        found = int(np.count_nonzero((log10 <= hi) & (log10 > lo)))
        bins[bin_label(spec)] = {"found": found, "need": need}
    ok = all(b["found"] >= b["need"] for b in bins.values())
    sft_info = {"steps": info["steps"], "check_accuracy": info["check_accuracy"]}
    seconds = time.perf_counter() - t0
    return {"seed": seed, "sft": sft_info, "candidates": len(candidates), "rounds": len(said),
            "bins": bins, "ok": ok, "seconds": seconds}  # fmt: skip


#: The quick studies that build the quick ladder, by their registry names.
STUDIES = ("ladder", "adaptive-n", "refresh")


def with_reference(cfg: Any, seed: int, cache_dir: str | None) -> Any:
    """``cfg`` (a ladder study's, or the refresh study's protocol) with the reference of SFT
    seed ``seed`` from ``cache_dir``."""
    if isinstance(cfg, LadderConfig):
        protocol = with_reference(cfg.protocol, seed, cache_dir)
        return replace(cfg, protocol=protocol)
    return replace(cfg, sft=replace(cfg.sft, seed=seed), cache_dir=cache_dir)


def run_studies(seed: int, cache_dir: str | None, out: Path) -> dict[str, Any]:
    """Each study of :data:`STUDIES` with ``--quick`` under the reference of SFT seed ``seed``,
    into ``out/NAME_sSEED``: per name ``ok``, ``seconds`` and ``error`` (the message of a
    failure)."""
    from experiments.registry import STUDIES as REGISTRY

    done: dict[str, Any] = {}
    for name in STUDIES:
        study = REGISTRY[name]
        cfg = with_reference(study.config.from_dict(study.presets({}, True)), seed, cache_dir)
        t0, error = time.perf_counter(), None
        try:
            study.run(
                cfg, out / f"{name.replace('-', '_')}_s{seed}", overwrite=True, progress=False
            )
        except (RuntimeError, ValueError) as e:
            error = str(e)
        done[name] = {"ok": error is None, "seconds": time.perf_counter() - t0, "error": error}
    return done


def main(argv: list[str] | None = None) -> int:
    """Print one line per seed; returns 1 when a bin of one is short."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sft-seeds", default="1,2,3", help="SFT seeds (comma-separated)")
    ap.add_argument("--cache-dir", default=None, help="SFT cache (default: the library's)")
    ap.add_argument("--studies", default="", help="Run the quick studies into this folder too")
    args = ap.parse_args(argv)
    ok = True
    for seed in (int(s) for s in args.sft_seeds.split(",")):
        got = fill(seed, args.cache_dir)
        bins = ", ".join(f"{b} {v['found']}/{v['need']}" for b, v in got["bins"].items())
        print(
            f"SFT seed {seed}: {got['sft']['steps']} SFT steps, check accuracy "
            f"{got['sft']['check_accuracy']:.3f}; {got['candidates']} candidates after "
            f"{got['rounds']} of {QUICK['top_ups']} search rounds; per bin "
            f"(found/needed): {bins}; {'filled' if got['ok'] else 'SHORT'} "
            f"({got['seconds']:.0f} s)",
            flush=True,
        )
        ok = ok and got["ok"]
        if args.studies:
            for name, r in run_studies(seed, args.cache_dir, Path(args.studies)).items():
                state = "passed" if r["ok"] else f"FAILED: {r['error']}"
                print(f"  {name} --quick: {state} ({r['seconds']:.0f} s)", flush=True)
                ok = ok and r["ok"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
