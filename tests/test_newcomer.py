"""A newcomer's first hour: every command README.md and docs/index.md show runs.

The commands are read from the two pages (their ``bash`` blocks, the inline commands of
index.md's table, and the Python blocks as plain scripts without a ``__main__`` guard), so a
command added to a page is tried here too. Each runs as a new user would: from an empty
temporary directory, with relative paths, through the installed ``astarpo`` console script,
on its smallest setting (``--quick`` where the verb has it, a few rows and tokens where it does
not) and with an empty SFT cache. Placeholders a reader fills in (``DIR``, ``train.jsonl``) get
the embedded toy model and a small prompt file. The test fails naming every command that
errored.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", ROOT / "docs" / "index.md")

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(3600)]

#: Commands the pages show that cannot run here, with the reason (matched as a prefix).
CANNOT_RUN = {
    "torchrun --nproc_per_node 8": "needs 8 GPUs",
    "make ": "the install itself (CI runs make test)",
    "pip install": "the install itself",
    "python -m venv": "the install itself",
    "python -m experiments.efficiency --peers trl": "needs the bench-trl extra (make test-trl)",
}

#: Per verb, what makes a command its smallest setting (added unless the flag is given).
SMALLEST: dict[str, list[str]] = {
    "demo": ["--quick", "--no-progress"],
    "theory": ["--quick"],
    "value": ["--n-samples", "2", "--max-new-tokens", "8", "--limit", "6", "--no-progress"],
    "train": ["--max-steps", "2", "--batch-size", "2", "--max-new-tokens", "8", "--progress", "0"],
    "eval": ["--limit", "2", "--max-new-tokens", "8", "--no-progress"],
}

#: What a reader puts where the pages write a placeholder.
PLACEHOLDERS = {"DIR": "toy", "models/base": "toy"}


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def shell_commands(text: str) -> list[str]:
    """The commands of a page: lines of its ``bash`` blocks and inline ``astarpo``/``python``
    commands (comments and continuation dots removed)."""
    out = []
    for block in _blocks(text, "bash"):
        out += [line.split("  #")[0].split(" # ")[0].strip() for line in block.splitlines()]
    out += re.findall(r"`(astarpo [^`\n]*)`", text)
    return [c for c in out if c and not c.startswith("#")]


def runnable(cmd: str) -> str | None:
    """Why ``cmd`` cannot run here (None: it can)."""
    for prefix, why in CANNOT_RUN.items():
        if cmd.startswith(prefix):
            return why
    if "..." in cmd:
        return "elided"
    if not cmd.startswith(("astarpo ", "python ")):
        return "not a command of the package"
    if " VERB" in cmd or "NAME" in cmd.split():
        return "a pattern, not a command"
    return None


def smallest(cmd: str) -> list[str]:
    """``cmd`` as an argv on its smallest setting, placeholders filled in."""
    argv = [PLACEHOLDERS.get(a, a) for a in shlex.split(cmd)]
    if argv[0] == "python":  # the lab: python -m experiments[.NAME], run in the clone
        argv[0] = sys.executable
        if len(argv) > 2 and "--quick" not in argv:
            argv.append("--quick")
        return argv
    argv[0] = str(Path(sys.executable).with_name("astarpo"))
    verb = argv[1]
    for flag, *value in _pairs(SMALLEST.get(verb, [])):
        if flag not in argv:
            argv += [flag, *value]
    if verb in ("value", "train") and "--data" in argv:
        argv[argv.index("--data") + 1] = "train.jsonl"
        if "toy" in argv and "--template" not in argv:
            argv += ["--template", "none"]  # the math template's characters are not the toy's
    return argv


def same_run(argv: list[str]) -> tuple[str, ...]:
    """What makes two commands the same run: their arguments but ``--out``'s folder."""
    out = list(argv)
    if "--out" in out:
        del out[out.index("--out") : out.index("--out") + 2]
    return tuple(out)


def covered(cmd: str, commands: list[str]) -> bool:
    """Whether another command of the pages runs ``cmd``'s work too: ``astarpo theory all``
    runs every experiment that ``astarpo theory NAME`` names, on the same smallest setting."""
    words = cmd.split()
    return (
        words[:2] == ["astarpo", "theory"]
        and len(words) > 2
        and words[2] != "all"
        and any(c.split()[:3] == ["astarpo", "theory", "all"] for c in commands)
    )


def _pairs(flags: list[str]) -> list[list[str]]:
    out: list[list[str]] = []
    for f in flags:
        if f.startswith("--"):
            out.append([f])
        else:
            out[-1].append(f)
    return out


def test_the_pages_show_commands_of_every_kind() -> None:
    cmds = [c for p in PAGES for c in shell_commands(p.read_text())]
    verbs = {shlex.split(c)[1] for c in cmds if c.startswith("astarpo ")}
    assert {"demo", "theory", "value", "train", "eval"} <= verbs, verbs
    assert sum(runnable(c) is None for c in cmds) >= 10


def test_every_documented_command_runs_from_an_empty_directory(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    rows = [f'{{"prompt": "{a}+{b}=", "answer": "{a + b}"}}\n' for a in range(3) for b in (1, 2)]
    (work / "train.jsonl").write_text("".join(rows))
    env = {
        **os.environ,
        "ASTARPO_CACHE": str(tmp_path / "cache"),  # a fresh machine: no SFT reference cached
        "HF_HUB_OFFLINE": "1",  # nothing may reach the hub
        "PYTHONPATH": "",
    }
    seen: set[tuple[str, ...]] = set()
    failures, ran = [], []
    commands = [c for page in PAGES for c in shell_commands(page.read_text())]
    for page in PAGES:
        for cmd in shell_commands(page.read_text()):
            if runnable(cmd) is not None:
                continue
            argv = smallest(cmd)
            key = same_run(argv)
            if key in seen or covered(cmd, commands):
                continue
            seen.add(key)
            cwd = work
            if cmd.startswith("python -m experiments"):  # the lab runs from the clone
                cwd = ROOT
                if "--out" in argv:  # its output goes to the empty directory, not the clone
                    at = argv.index("--out") + 1
                    argv[at] = str(work / argv[at])
            done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
            ran.append(cmd)
            if done.returncode != 0:
                tail = (done.stdout + done.stderr)[-1500:]
                failures.append(f"{page.name}: `{cmd}` -> exit {done.returncode}\n{tail}")
    for script in (b for p in PAGES for b in _blocks(p.read_text(), "python")):
        path = work / f"snippet_{len(ran)}.py"
        path.write_text(script)  # a plain script: no __main__ guard
        done = subprocess.run([sys.executable, path.name], cwd=work, env=env, capture_output=True,
                              text=True)  # fmt: skip
        ran.append(path.name)
        if done.returncode != 0:
            failures.append(f"{path.name}:\n{script}\n-> {(done.stdout + done.stderr)[-1500:]}")
    assert len(ran) >= 10, ran
    assert not failures, "\n\n".join(failures)
