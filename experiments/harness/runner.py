"""The runs of a study, each in a fresh process on a stated clock (:class:`Runner`, whose
processes run :func:`main`), and the seed loop (:func:`rotated`); the sweep is
:mod:`experiments.harness.sweep`, the output folder :mod:`experiments.harness.output`.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import astarpo
from experiments.harness.output import RUN_NEUTRAL, OutputDir, open_output

__all__ = [
    "MIN_CPU_SHARE",
    "Runner",
    "entry",
    "main",
    "rotated",
    "run_process",
]

#: A run whose CPU time over wall time is below this had its core shared: flagged ``slow``.
MIN_CPU_SHARE = 0.9


def run_process(cmd: Sequence[str], **popen: Any) -> tuple[int, float, float]:
    """``(exit code, wall s, CPU s of the child)`` of ``cmd`` run to completion (``Popen``
    keywords: ``cwd``, ``env``, ``stdout``)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, **popen)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, time.perf_counter() - t0, usage.ru_utime + usage.ru_stime


def entry(function: Callable[[dict[str, Any]], dict[str, Any]]) -> str:
    """The ``"entry"`` of a run's spec that calls ``function`` (``spec -> result``) in the
    run's process: ``"MODULE:NAME"`` (a module-level function)."""
    if "." in function.__qualname__ or function.__module__ == "__main__":
        raise ValueError(f"a run's entry must be a module-level function, got {function!r}.")
    return f"{function.__module__}:{function.__qualname__}"


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


class Runner:
    """Runs spec ``runs/NAME/spec.json`` as ``python -m experiments.harness.runner
    spec.json result.json`` and adds the process's wall and CPU time (CPU/wall below
    :data:`MIN_CPU_SHARE`: ``slow``); warns when the load average exceeds the runs' cores.

    Args:
        output: The study's output folder; run ``NAME`` runs in ``runs/NAME`` (recorded).
        threads: Torch/OpenMP threads of each run.
        workers: Runs at once in :meth:`run_all`.
        rerun_slow: Run a ``slow`` run again, once.
        say: Progress printer.
        describe: ``result -> str``: the study's account of a finished run.
        resume: Read back, instead of running, a run that finished in an earlier, interrupted
            run of the study (its ``result.json`` with the process clock, and the same spec).
    """

    def __init__(
        self,
        output: OutputDir,
        threads: int = 1,
        workers: int = 1,
        rerun_slow: bool = False,
        say: Callable[[str], Any] = print,
        describe: Callable[[dict[str, Any]], str] = lambda r: "done",
        resume: bool = False,
    ) -> None:
        self.output, self.workers, self.rerun_slow = output, workers, rerun_slow
        self.say, self.describe, self.resume = say, describe, resume
        self.resumed: list[str] = []  # the runs read back (list.append: safe from threads)
        self.t0, self.load, self.warning = time.perf_counter(), _load(), None
        if self.load[0] > workers * threads:
            self.warning = (
                f"the 1-minute load average is {self.load[0]}, above the {workers * threads} "
                "cores these runs use: other processes share the cores, so the runs' timings "
                "may be longer than on an idle machine (flagged `slow` where CPU/wall < 0.9)"
            )
            print(f"warning: {self.warning}", file=sys.stderr, flush=True)
        # The same astarpo and the same lab in the workers (the lab is not installed).
        lab = str(Path(__file__).resolve().parents[2])
        src = str(Path(astarpo.__file__).resolve().parents[1])
        path = os.pathsep.join(
            dict.fromkeys([src, lab, *filter(None, [os.environ.get("PYTHONPATH")])])
        )
        self.env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": path}
        self.env["TOKENIZERS_PARALLELISM"] = "false"

    @classmethod
    def start(
        cls,
        out_dir: str | Path,
        stem: str,
        outputs: tuple[str, ...],
        cfg: Any,
        overwrite: bool,
        progress: bool,
        workers: int = 1,
        resume: bool = False,
    ) -> Runner:
        """A study's start: its :class:`OutputDir` ``out_dir`` (stem ``stem``, other names
        ``outputs``) opened by :func:`open_output` (locked; cleared by the ``--overwrite``
        policy, or kept and its settings checked, ``resume``), and a runner with ``cfg``'s
        ``threads`` and ``rerun_slow`` that prints progress when ``progress``."""
        say = print if progress else (lambda *a, **k: None)
        output = open_output(out_dir, stem, outputs, cfg, overwrite, resume, say)
        return cls(output, cfg.threads, workers, cfg.rerun_slow, say, resume=resume)

    def run(
        self, name: str, spec: dict[str, Any], rerun_slow: bool | None = None
    ) -> dict[str, Any]:
        """Run ``spec`` in ``runs/NAME``, its ``paths`` entries (and ``out``, the run's folder)
        made absolute; the result with ``process``: ``wall_s``, ``cpu_s``, ``cpu_wall``,
        ``slow`` (and ``first_attempt`` after a re-run; ``resumed`` when read back).
        ``rerun_slow`` overrides the runner's for this run (``False`` for a run whose result
        does not read the clock: a slow one is flagged, not run again).
        ``RuntimeError`` if the process fails.
        """
        again = self.rerun_slow if rerun_slow is None else rerun_slow
        if self.resume and (done := self._finished(name, spec, again)) is not None:
            self.resumed.append(name)
            self.say(f"  {name}: {self.describe(done)} [finished earlier; read back]")
            return done
        res = self._attempt(name, spec)
        if res["process"]["slow"] and again:
            self.say(f"  {name}: CPU/wall {res['process']['cpu_wall']:.2f}; running it again")
            res = self._attempt(name, spec, first=res["process"])
        return res

    @staticmethod
    def _full_spec(run_dir: Path, spec: dict[str, Any]) -> dict[str, Any]:
        """``spec`` as the worker reads it: ``out`` the run's folder, ``paths`` absolute."""
        full = {**spec, "out": str(run_dir), "paths": sorted({"out", *spec.get("paths", ())})}
        for key in full["paths"]:  # the worker runs in run_dir: a relative path would not resolve
            if full.get(key) is not None:
                full[key] = str(Path(full[key]).resolve())
        return full

    @staticmethod
    def _comparable(spec: dict[str, Any]) -> dict[str, Any]:
        """``spec`` as two runs of one study compare it wherever its folder lies: the paths
        inside the study's folder (``out`` is ``STUDY/runs/NAME``) relative to it, the
        settings of :data:`RUN_NEUTRAL` left out."""
        root = Path(spec["out"]).parents[1]
        out = {**spec, "config": dict(spec.get("config") or {})}
        for key in RUN_NEUTRAL:
            out["config"].pop(key, None)
        for key in spec.get("paths", ()):
            if isinstance(spec.get(key), str) and Path(spec[key]).is_relative_to(root):
                out[key] = f"STUDY/{Path(spec[key]).relative_to(root)}"
        return out

    def _finished(self, name: str, spec: dict[str, Any], again: bool) -> dict[str, Any] | None:
        """The result of run ``name`` if an earlier run of the study finished it with this
        ``spec`` (its result holds the process clock, written last; paths inside the study's
        folder compared relative to it, so that a moved folder resumes), else None (also for
        a ``slow`` run not yet run again where ``again``: slow runs are run again). A finished
        run of another spec is moved aside to ``runs/NAME.replaced`` (never deleted)."""
        run_dir = (self.output.path / "runs" / name).resolve()
        try:
            old = json.loads((run_dir / "spec.json").read_text())
            res: dict[str, Any] = json.loads((run_dir / "result.json").read_text())
        except (OSError, json.JSONDecodeError):
            return None
        new = json.loads(json.dumps(self._full_spec(run_dir, spec)))
        if "process" not in res:
            return None
        if self._comparable(old) != self._comparable(new):
            aside = self.output.record(f"runs/{name}.replaced")
            shutil.rmtree(aside, ignore_errors=True)
            run_dir.rename(aside)
            self.say(f"  {name}: finished earlier with another spec; kept as {aside}")
            return None
        clock = res["process"]
        if again and clock.get("slow") and "first_attempt" not in clock:
            return None  # a slow run the earlier study did not run again: its re-run is due
        clock["resumed"] = True
        return res

    def _attempt(
        self, name: str, spec: dict[str, Any], first: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """One run of ``spec`` in ``runs/NAME`` from scratch; its result with the process clock
        (and ``first_attempt``, the clock of the attempt it repeats) written last."""
        run_dir = self.output.record(f"runs/{name}").resolve()
        shutil.rmtree(run_dir, ignore_errors=True)  # a re-run starts afresh
        run_dir.mkdir(parents=True)
        full = self._full_spec(run_dir, spec)
        (run_dir / "spec.json").write_text(json.dumps(full))
        cmd = [sys.executable, "-m", "experiments.harness.runner", "spec.json", "result.json"]
        code, wall, cpu = run_process(cmd, cwd=run_dir, env=self.env)
        if code != 0:
            raise RuntimeError(
                f"run {name} failed (exit code {code}); its traceback is above and its spec and "
                f"files are in {run_dir}."
            )
        res: dict[str, Any] = json.loads((run_dir / "result.json").read_text())
        share = cpu / wall if wall > 0 else math.nan
        res["process"] = {"wall_s": wall, "cpu_s": cpu, "cpu_wall": share}
        res["process"]["slow"] = bool(share < MIN_CPU_SHARE)
        if first is not None:  # recorded: a resumed study reads this run back, not runs it again
            res["process"]["first_attempt"] = first
        tmp = run_dir / "result.json.tmp"  # the clock written last: a run that has it finished
        tmp.write_text(json.dumps(res, indent=1))
        os.replace(tmp, run_dir / "result.json")
        self.output.seal(f"runs/{name}")  # its files are the study's (--overwrite deletes them)
        flag = " (slow: its core was shared)" if res["process"]["slow"] else ""
        self.say(f"  {name}: {self.describe(res)} [{wall:.0f} s wall, CPU/wall {share:.2f}{flag}]")
        return res

    def run_all(
        self,
        runs: Sequence[tuple[str, dict[str, Any]]],
        workers: int | None = None,
        rerun_slow: bool | None = None,
    ) -> list[dict[str, Any]]:
        """:meth:`run` of every ``(name, spec)``, ``workers`` (default :attr:`workers`) at a
        time, ``rerun_slow`` passed to each; results in order."""
        with ThreadPoolExecutor(workers or self.workers) as pool:
            return list(pool.map(lambda run: self.run(run[0], run[1], rerun_slow), runs))

    def stamp(self, result: dict[str, Any]) -> None:
        """Add the study's ``wall_s`` (of this process: a resumed study's runs read back are
        not in it), ``load`` (``start``, ``end``, ``warning``), ``slow_runs``, ``resumed_runs``
        and ``environment`` (versions, cores, GPU) to ``result``."""
        import torch

        result["wall_s"] = time.perf_counter() - self.t0
        result["load"] = {"start": self.load, "end": _load(), "warning": self.warning}
        result["slow_runs"] = sum(r.get("process", {}).get("slow", 0) for r in result["runs"])
        result["resumed_runs"] = len(self.resumed)
        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
        versions = {"astarpo": astarpo.__version__, "python": platform.python_version()}
        result["environment"] = {**versions, "torch": torch.__version__, "gpu": gpu}
        result["environment"]["cpus"] = os.cpu_count()


def main(argv: list[str]) -> int:
    """A run's process: the spec ``argv[0]``'s ``"entry": "MODULE:FUNCTION"`` called with it
    (relative ``paths`` and another form of entry refused first, ``ValueError``), its result
    written to ``argv[1]``."""
    spec_path, out_path = argv
    spec = json.loads(Path(spec_path).read_text())
    relative = [
        f"{key}={spec[key]!r}"
        for key in spec.get("paths", ())
        if spec.get(key) is not None and not Path(spec[key]).is_absolute()
    ]
    if relative:
        raise ValueError(
            f"run spec: relative paths {', '.join(relative)}; a worker runs in its own run "
            "folder, where they do not resolve. Write absolute paths into the spec (the Runner "
            "does: Path.resolve())."
        )
    module, _, function = spec["entry"].partition(":")
    if not module or not function:
        raise ValueError(f"run spec: entry {spec['entry']!r} is not 'MODULE:FUNCTION'.")
    entry = getattr(importlib.import_module(module), function)
    Path(out_path).write_text(json.dumps(entry(spec), indent=1))
    return 0


def rotated(names: Sequence[Any], seeds: int) -> Iterator[tuple[int, Any]]:
    """``(seed, name)`` of every run, seed by seed, ``names`` rotated per seed (so that the slow
    phases of a shared machine hit every name)."""
    for seed in range(seeds):
        k = seed % len(names)
        for name in [*names[k:], *names[:k]]:
            yield seed, name


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
