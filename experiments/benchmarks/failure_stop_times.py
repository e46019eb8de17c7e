"""How long a 2-process ``torchrun`` job takes to stop after one rank fails or stalls.

Each case runs ``torchrun --nproc_per_node 2 -m astarpo train --model toy ...`` on CPU (gloo)
with one fault planted on rank 1 by ``tests/llm/faults.py`` (once, at a fixed step) and times
the fault (written into its mark file) to the exit of ``torchrun`` (after every worker's), with
the root cause of its failure summary. Cases: ``raise`` (the reward raises), ``kill``
(SIGKILL), ``reward_hang`` (the reward hangs; ``--reward-timeout 10``) and ``generate_stall``
(``generate`` hangs; ``--dist-timeout 10``: the watchdog stops it).

    python -m experiments.benchmarks.failure_stop_times                 # every case, 3 runs each
    python -m experiments.benchmarks.failure_stop_times --cases raise --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests" / "llm"
COMMON = ["--model", "toy", "--template", "none", "--reward", "faults:exact_reward"]
COMMON += ["--device", "cpu"]

CASES = {  # name: (fault, extra flags, entry point)
    "raise": ("raise:1:2", [], ["-m", "astarpo"]),
    "kill": ("kill:1:2", [], ["-m", "astarpo"]),
    "reward_hang": ("hang:1:2", ["--reward-timeout", "10"], ["-m", "astarpo"]),
    "generate_stall": ("stall:1:3", ["--dist-timeout", "10"], [str(TESTS / "fault_main.py")]),
}


def _env(fault: str = "", mark: str = "") -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{ROOT}{os.pathsep}{TESTS}"}
    return env | {"ASTARPO_TEST_FAULT": fault, "ASTARPO_TEST_FAULT_MARK": mark}


def _root_cause(stderr: str) -> str:
    if "Root Cause" not in stderr:
        return "(no failure summary)"
    part = stderr.split("Root Cause (first observed failure):")[1]
    rank = next((x.strip() for x in part.splitlines() if x.strip().startswith("rank ")), "")
    lines = [x.strip() for x in part.splitlines() if "Error" in x or "Signal" in x]
    return f"{rank}; {lines[-1][:160] if lines else '?'}"


def run_case(name: str, work: Path, i: int) -> dict:
    """One run of case ``name`` in ``work`` (its ``i``-th): exit code, seconds, root cause."""
    from dist_setup import free_port  # the tests' helper

    fault, extra, entry = CASES[name]
    mark = work / f"{name}-{i}.mark"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    cmd += ["--master_addr", "127.0.0.1", "--master_port", str(free_port()), *entry, "train"]
    cmd += [*COMMON, "--data", str(work / "p.jsonl"), "--v-star", str(work / "v.jsonl")]
    cmd += ["--max-steps", "4", "--batch-size", "4", "--max-new-tokens", "3", "--save-steps", "1"]
    cmd += ["--progress", "false", "--report-to", "none", "--out", str(work / f"{name}-{i}")]
    cmd += extra
    start = time.time()
    proc = subprocess.run(cmd, env=_env(fault, str(mark)), capture_output=True, text=True)
    end = time.time()
    fired = float(mark.read_text().split()[-1]) if mark.exists() else float("nan")
    res = {"case": name, "exit_code": proc.returncode, "fault_to_exit_s": round(end - fired, 2)}
    return res | {"launch_to_exit_s": round(end - start, 2), "root_cause": _root_cause(proc.stderr)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
        from astarpo.llm import addition_task

        rows = addition_task(8, seed=0)
        (work / "p.jsonl").write_text(
            "".join(json.dumps({k: r[k] for k in ("problem", "answer")}) + "\n" for r in rows)
        )
        value = [sys.executable, "-m", "astarpo", "value", *COMMON, "--data", str(work / "p.jsonl")]
        value += ["--out", str(work / "v.jsonl"), "--n-samples", "2", "--max-new-tokens", "3"]
        subprocess.run([*value, "--no-progress"], env=_env(), check=True, capture_output=True)
        for name in args.cases:
            results = [run_case(name, work, i) for i in range(args.repeats)]
            for r in results:
                print(json.dumps(r), flush=True)
            t = [r["fault_to_exit_s"] for r in results]
            spread = f"(min {min(t):.1f}, max {max(t):.1f}, {len(t)} runs)"
            med = f"median {statistics.median(t):.1f} s"
            print(f"{name}: fault -> every process exited: {med} {spread}", flush=True)


if __name__ == "__main__":
    main()
