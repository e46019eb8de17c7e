"""``--config FILE``: a verb's options read from a YAML (or JSON) file, TRL style.

Every key of the file is the name of one of the verb's options, with underscores or dashes
(``learning_rate: 1.0e-6`` is ``--learning-rate 1e-6``), and its value is checked as the flag's
would be: the option's type, its choices (an error lists them), one value or a list for a
repeatable option, a mapping for an option that takes a JSON object (``model_overrides:
{hidden_size: 32}``), ``true``/``false`` for a switch (``overwrite: true``); ``null`` only for an
option without a default. Options given on the command line override the file. A file may
hold one section per verb (``value:``, ``train:``, ...): each verb then reads its own section
and ignores the others, so one file describes a whole pipeline (the packaged
``configs/paper.yaml`` does). A key that is not an option of the verb, or a section that
is not a verb, is an error naming the key and the file; so is a field of another algorithm than
the file's (or the command line's) ``algo`` in a ``train`` section.

``run_config.json``, written by every training run, is accepted as well: its algorithm, config
fields and trainer extensions become ``astarpo train``'s options, so ``astarpo train --config
runs/a/run_config.json --model ... --data ... --out runs/b`` repeats a run (but never its
``--out`` or ``--overwrite``; :mod:`astarpo.commands.run_config`).

A ``--config`` value that is a bare name and not an existing file is looked up among the presets
shipped in the package (``astarpo/configs``): ``--config paper``, ``--config paper.yaml`` and
``--config configs/paper.yaml`` all name the paper's settings, from any directory. Any other
path must be an existing file (``/elsewhere/paper.yaml`` never falls back to the preset).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from astarpo.commands.console import shown
from astarpo.commands.fields import NotAnOption
from astarpo.commands.run_config import is_run_config, run_config_options
from astarpo.config import CommaList, JSONObject

__all__ = [
    "PRESETS_DIR",
    "add_config_argument",
    "apply_config_file",
    "config_values",
    "presets",
    "resolve_config_path",
]

#: The folder of the packaged presets (``paper.yaml``).
PRESETS_DIR = Path(__file__).resolve().parent.parent / "configs"

#: The most values (mapping entries and list items, counted as YAML aliases expand them) a
#: config file may hold, and how deeply they may nest. Nested aliases multiply what they name (a
#: "billion laughs" of a few hundred bytes expands to 10**9 items), so the expansion is counted,
#: stopping at the budget, before any value is read.
MAX_VALUES = 10_000
MAX_DEPTH = 10

# Verb names a sectioned file may hold (kept in step with astarpo.cli.VERBS by a test).
_VERBS = ("theory", "value", "train", "eval", "demo", "convert")


def presets() -> list[str]:
    """Names of the packaged presets (``["paper"]``)."""
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--config FILE`` to a verb's parser (its help lists the packaged presets)."""
    names = ", ".join(presets()) or "none"
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="read options from a YAML/JSON file (keys are option names; flags given on the "
        f"command line win), or a run's run_config.json. Packaged presets: {names} "
        "(e.g. --config paper: the official scripts' settings).",
    )


def resolve_config_path(spec: str) -> Path:
    """The file that ``--config spec`` names: an existing file, else the packaged preset that a
    bare name (``paper``, ``paper.yaml``) or ``configs/NAME.yaml`` names.

    Any other path must exist: a missing file in another folder is never taken for a preset of
    the same name.

    Raises:
        SystemExit: with an ``error:`` line naming ``spec``: a directory, a missing file, or a
            bare name that is not a preset.
    """
    path = Path(spec)
    if path.is_file():
        return path
    names = ", ".join(presets()) or "none"
    if path.is_dir():
        raise SystemExit(
            f"error: --config {spec!r} is a directory; give a YAML/JSON file (or a run's "
            f"run_config.json), or a packaged preset by name ({names})."
        )
    if path.exists():
        raise SystemExit(f"error: --config {spec!r} is not a regular file; give a YAML/JSON file.")
    if len(path.parts) == 1 or (len(path.parts) == 2 and path.parts[0] == "configs"):
        preset = PRESETS_DIR / (path.name if path.suffix else f"{path.name}.yaml")
        if preset.is_file():
            return preset
        raise SystemExit(
            f"error: --config {spec!r}: no such file, and not a packaged preset ({names})."
        )
    folder = "" if path.parent.is_dir() else f" (nor its folder {str(path.parent)!r})"
    raise SystemExit(
        f"error: --config {spec!r}: no such file{folder}; give an existing YAML/JSON file, or "
        f"a packaged preset by name ({names})."
    )


def config_values(
    path: Path, verb: str, sections: tuple[str, ...] = _VERBS, names: Collection[str] = ()
) -> dict[str, Any]:
    """The option values that the file at ``path`` gives ``verb`` (keys with underscores): the
    whole file, or its section ``verb`` when it is divided into ``sections`` (the verbs). A key
    of ``names`` (the verb's options) is a value: a mapping there is an option's JSON object;
    any other key holding a mapping is a section.

    Raises:
        SystemExit: the file cannot be read or parsed, is not a mapping, or names a section that
            is not a verb.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SystemExit(f"error: --config {path}: cannot read it ({e}).") from e
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml  # a dependency of transformers; named in the llm extra

            data = yaml.safe_load(text)
    except Exception as e:
        raise SystemExit(f"error: --config {path}: not valid YAML/JSON ({e}).") from e
    check_size(data, path)
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise SystemExit(
            f"error: --config {path}: the file must hold a mapping of option names to values, "
            f"got {type(data).__name__}."
        )
    if is_run_config(data):  # a run's run_config.json: repeat the run
        return run_config_options(data)
    # A verb's name is always a section (no option has one): ``train:`` with nothing under it
    # is an empty section, ``train: 5`` a mistake.
    known = sections
    found = [
        k
        for k, v in data.items()
        if k in known or (isinstance(v, Mapping) and str(k).replace("-", "_") not in names)
    ]
    for k in found:
        if not isinstance(data[k], Mapping) and data[k] is not None:
            raise SystemExit(
                f"error: --config {path}: section {shown(k)} must hold the verb's options "
                f"(a mapping of option names to values), got {type(data[k]).__name__}: "
                f"{shown(data[k])}."
            )
    if found:
        foreign = [k for k in found if k not in known]
        if foreign:
            raise SystemExit(
                f"error: --config {path}: section {shown(foreign[0])} is not a verb "
                f"({', '.join(sections)})."
            )
        flat = [k for k in data if k not in found]
        if flat:
            raise SystemExit(
                f"error: --config {path}: key {shown(flat[0])} stands outside the verb sections; "
                "put it under the verb it belongs to (e.g. train:)."
            )
        data = data.get(verb) or {}
    options: dict[str, Any] = {}
    for k, v in data.items():
        key = str(k).replace("-", "_")
        if key in options:  # learning_rate and learning-rate: which one was meant?
            raise SystemExit(
                f"error: --config {path}: key {shown(k)} sets the option {shown(key)} a second "
                "time; keep one of the two."
            )
        options[key] = v
    return options


def check_size(data: Any, path: Path) -> None:
    """Refuse the values ``data`` of the file ``path`` when they expand to more than
    :data:`MAX_VALUES` items or nest deeper than :data:`MAX_DEPTH` levels.

    The count stops at the budget, so an alias bomb costs no more than a small file.

    Raises:
        SystemExit: an ``error:`` line naming the file and the limit.
    """
    todo: list[tuple[Any, int]] = [(data, 1)]
    count = 1
    while todo:
        node, depth = todo.pop()
        if isinstance(node, Mapping):
            children = list(node.values())
        elif isinstance(node, list):
            children = node
        else:
            continue
        if children and depth >= MAX_DEPTH:
            raise SystemExit(
                f"error: --config {path}: its values nest deeper than {MAX_DEPTH} levels; a "
                "config file holds one value (or one list of values) per option."
            )
        count += len(children)
        if count > MAX_VALUES:
            raise SystemExit(
                f"error: --config {path}: its values expand to more than {MAX_VALUES} items "
                "(YAML aliases repeat what they name, and nested aliases multiply it); a config "
                "file holds one value per option: write the values out instead."
            )
        todo.extend((child, depth + 1) for child in children)


def _convert(action: argparse.Action, key: str, value: Any, path: Path) -> Any:
    """``value`` checked and converted as the flag's text would be: the option's type (YAML
    reads ``1e-6`` as a string), its choices and its number of values."""
    where = f"--config {path}: {key}"
    if value is None:
        if action.default is None and not action.required:
            return None  # the option not given
        fix = (
            f"give {action.option_strings[0]} on the command line"
            if action.required
            else f"the default is {shown(action.default)}"
        )
        raise SystemExit(
            f"error: {where} has no value (null); give one or leave the key out ({fix})."
        )
    if action.nargs == 0:  # store_true, store_false, --x/--no-x: the key holds the value
        if not isinstance(value, bool):
            raise SystemExit(f"error: {where} must be true or false, got {shown(value)}.")
        return value
    nargs = action.nargs
    if isinstance(action, argparse._AppendAction) or nargs in ("*", "+") or isinstance(nargs, int):
        items = value if isinstance(value, list) else [value]
        if (nargs == "+" and not items) or (isinstance(nargs, int) and len(items) != nargs):
            count = "at least one value" if nargs == "+" else f"{nargs} values"
            raise SystemExit(f"error: {where} takes {count}, got {shown(value)}.")
        return [_convert_one(action, where, v) for v in items]
    if isinstance(action.type, CommaList) and isinstance(value, list):  # the flag's a,b
        value = ",".join(_text(where, v) for v in value)
    if isinstance(action.type, JSONObject) and isinstance(value, Mapping):  # the flag's {...}
        value = json.dumps(value, default=str)
    return _convert_one(action, where, value)


def _text(where: str, value: Any) -> str:
    """The flag's text of one value (a list or mapping is not one)."""
    if isinstance(value, (list, Mapping)):
        kind = "a list" if isinstance(value, list) else "a mapping"
        raise SystemExit(f"error: {where} takes one value, got {kind}: {shown(value)}.")
    if isinstance(value, bool):
        return "true" if value else "false"  # the YAML spelling, which parse_bool reads
    return value if isinstance(value, str) else str(value)


def _convert_one(action: argparse.Action, where: str, value: Any) -> Any:
    text = _text(where, value)
    out: Any = text
    if action.type is not None:
        convert: Any = action.type
        try:
            out = convert(text)
        except argparse.ArgumentTypeError as e:
            raise SystemExit(f"error: {where}: {_clip(str(e))}.") from e
        except (TypeError, ValueError) as e:
            name = getattr(convert, "__name__", repr(convert))
            raise SystemExit(f"error: {where}: invalid {name} value: {shown(text)}.") from e
    if action.choices is not None and out not in action.choices:
        raise SystemExit(
            f"error: {where}: invalid choice: {shown(out)} (choose from "
            f"{', '.join(map(repr, action.choices))})."
        )
    return out


def _clip(text: str, limit: int = 200) -> str:
    """``text`` cut to at most ``limit`` characters (``...`` marks a cut)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def apply_config_file(
    parser: argparse.ArgumentParser, verb: str, spec: str, sections: tuple[str, ...] = _VERBS
) -> None:
    """Set the defaults of ``parser`` (one verb's) from the file ``spec`` names.

    Flags parsed afterwards override these defaults. An option the file sets is no longer
    required on the command line.

    Raises:
        SystemExit: a key that is not an option of ``verb`` (named, with the file), or a value
            of the wrong type.
    """
    path = resolve_config_path(spec)
    dests = {a.dest for a in parser._actions if a.dest not in ("help", "config")}
    values = config_values(path, verb, sections, dests - set(sections))
    actions = {a.dest: a for a in parser._actions if a.dest not in ("help", "config")}
    defaults: dict[str, Any] = {}
    for key, value in values.items():
        action = actions.get(key)
        if action is None:
            raise SystemExit(
                f"error: --config {path}: unknown key {shown(key)}: not an option of "
                f"`{parser.prog}` (see {parser.prog} --help)."
            )
        if isinstance(action, NotAnOption):  # a field of another algorithm than --algo
            raise SystemExit(
                f"error: --config {path}: key {shown(key)}: {action.option_strings[0]} "
                f"{action.reason}."
            )
        defaults[key] = _convert(action, key, value, path)
        action.required = False
    parser.set_defaults(**defaults)
