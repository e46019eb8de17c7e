"""The public config helpers (:mod:`astarpo.config`): one field style, flags made from the
fields, a mapping in a ``--config`` file for an option that takes a JSON object."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

import pytest

import astarpo
from astarpo import (
    add_config_argument,
    add_field_arguments,
    apply_config_file,
    config_fields,
    doc_field,
    field_values,
    name_flags,
)
from astarpo.llm import (
    AStarPOConfig,
    GRPOConfig,
    PPOConfig,
    REBELConfig,
    RLOOConfig,
    SFTConfig,
    Stage1Config,
    TrainConfig,
)


@dataclass(frozen=True)
class Toy:
    steps: int = doc_field(3, "Steps.")
    rates: tuple[float, ...] = doc_field((1e-4, 3e-4), "Rates.")
    kind: str = doc_field("a", "Kind.", choices=("a", "b"))
    overrides: dict[str, int] = doc_field({}, "Overrides.")
    quiet: bool = doc_field(False, "Quiet.")

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}.")


def test_every_library_config_declares_its_fields_one_way_with_help():
    for cls in (TrainConfig, AStarPOConfig, GRPOConfig, RLOOConfig, PPOConfig, REBELConfig):
        assert all(help_text for _, _, help_text in config_fields(cls)), cls
    for cls in (Stage1Config, SFTConfig):
        fields = config_fields(cls)
        assert fields and all(help_text for _, _, help_text in fields), cls
        assert [f.name for f in dataclasses.fields(cls)] == [n for n, _, _ in fields]
    assert dict((n, d) for n, d, _ in config_fields(SFTConfig))["steps"] == 600


def test_a_mutable_default_is_copied_for_every_instance():
    a, b = Toy(), Toy()
    a.overrides["x"] = 1
    assert b.overrides == {} and Toy().overrides == {}
    assert [f.metadata["choices"] for f in dataclasses.fields(Toy) if f.name == "kind"] == [
        ("a", "b")
    ]


def test_flags_from_fields_read_back_typed_and_errors_name_the_flag():
    parser = argparse.ArgumentParser()
    add_field_arguments(parser, Toy)
    args = parser.parse_args(["--rates", "1e-3,2e-3", "--overrides", '{"n": 2}', "--quiet", "yes"])
    cfg = Toy(**field_values(Toy, args))
    assert cfg.rates == (1e-3, 2e-3) and cfg.overrides == {"n": 2} and cfg.quiet is True
    with pytest.raises(SystemExit):
        parser.parse_args(["--kind", "c"])  # not a choice
    with pytest.raises(ValueError, match="steps") as e:
        Toy(steps=0)
    assert name_flags(str(e.value), Toy) == "--steps must be >= 1, got 0."
    unset = argparse.ArgumentParser()
    add_field_arguments(unset, Toy, unset=True)
    assert field_values(Toy, unset.parse_args(["--no-quiet"])) == {"quiet": False}


def test_a_config_file_gives_a_mapping_to_a_json_object_option(tmp_path):
    parser = argparse.ArgumentParser(prog="toy")
    add_field_arguments(parser, Toy)
    add_config_argument(parser)
    f = tmp_path / "c.yaml"
    f.write_text("overrides: {hidden_size: 32}\nrates: [1.0e-3]\n")
    apply_config_file(parser, "toy", str(f), ("toy",))
    args = parser.parse_args([])
    assert args.overrides == {"hidden_size": 32} and args.rates == (1e-3,)
    f.write_text("steps: {a: 1}\n")  # a mapping for an option of one value stays refused
    with pytest.raises(SystemExit, match="steps takes one value, got a mapping"):
        apply_config_file(parser, "toy", str(f), ("toy",))


def test_the_config_helpers_are_exported_from_the_package():
    for name in ("doc_field", "add_field_arguments", "apply_config_file", "check_output"):
        assert name in astarpo.__all__ and getattr(astarpo, name).__doc__
