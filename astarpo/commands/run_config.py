"""A run's ``run_config.json`` as the options of ``astarpo train`` (``--config
runs/a/run_config.json`` repeats the run; :mod:`astarpo.commands.config_file`).

Its config fields become the field flags, its algorithm ``--algo``, its reward functions'
dotted paths ``--reward``, and the settings of its trainer extensions the extensions' options
(:mod:`astarpo.commands.train_extensions`): ``{"refresh": {"every_steps": 2, ...}}`` is
``--refresh-every-steps 2 ...``, ``{"stream": {...}}`` is ``--stream-stage1 true --stream-...``.
The old run's ``output_dir`` and ``overwrite_output_dir`` are never taken: ``--out`` stays
required, and ``--overwrite`` must be given on the command line, so a repeated run cannot
delete the old one. Light: nothing of the trainer is imported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["NOT_REPEATED", "SWITCHES", "extension_options", "is_run_config", "run_config_options"]

#: Fields of ``run_config.json``'s ``config`` that a repeated run never takes.
NOT_REPEATED = ("output_dir", "overwrite_output_dir")

#: Each trainer extension's name (the prefix of its options, its key in ``run_config.json``'s
#: ``extensions``) and the option that turns it on.
SWITCHES = {"refresh": "refresh_every_steps", "stream": "stream_stage1"}


def is_run_config(data: Mapping[str, Any]) -> bool:
    """Whether a config file's content is a ``run_config.json``."""
    return "config_class" in data and isinstance(data.get("config"), Mapping)


def run_config_options(data: Mapping[str, Any]) -> dict[str, Any]:
    """The options (argparse dests) of ``astarpo train`` that repeat the run of a
    ``run_config.json`` (see the module docstring).

    Raises:
        SystemExit: an extension ``astarpo train`` does not know.
    """
    values = {k: v for k, v in data["config"].items() if k not in NOT_REPEATED}
    if data.get("algorithm") is not None:
        values["algo"] = data["algorithm"]
    if data.get("rewards"):
        values["reward"] = list(data["rewards"])
    values.update(extension_options(data.get("extensions") or {}))
    return {k.replace("-", "_"): v for k, v in values.items()}


def extension_options(extensions: Mapping[str, Any]) -> dict[str, Any]:
    """The options that install the trainer extensions ``run_config.json`` records
    (``{"refresh": {"every_steps": 2}}`` -> ``{"refresh_every_steps": 2}``, ``{"stream":
    {"n_samples": 4}}`` -> ``{"stream_stage1": True, "stream_n_samples": 4}``).

    Raises:
        SystemExit: an extension ``astarpo train`` does not know.
    """
    out: dict[str, Any] = {}
    for name, settings in extensions.items():
        if name not in SWITCHES:
            raise SystemExit(
                f"error: the run's extension {name!r} is not one of `astarpo train` "
                f"({', '.join(SWITCHES)})."
            )
        out.update({f"{name}_{k}": v for k, v in dict(settings).items()})
        out.setdefault(SWITCHES[name], True)  # refresh: refresh_every_steps is a setting
    return out
