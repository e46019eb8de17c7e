"""The tests' one trainer factory (toy_setup.toy_trainer): what it routes where, and that no test
module builds trainers with a private factory again."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from toy_setup import QUICK_RUN, QUIET, first_digit_reward, toy_trainer

TESTS = Path(__file__).resolve().parent


def test_trainer_keywords_and_config_fields_are_routed(tokenizer, tmp_path):
    def evaluate(model):
        return {"accuracy": 0.0}

    tr = toy_trainer(tokenizer, tmp_path, eval_fn=evaluate, max_steps=5, beta2=0.5)
    assert tr.eval_fn is evaluate  # a Trainer keyword
    assert (tr.args.max_steps, tr.args.beta2) == (5, 0.5)  # config fields
    for name, value in {**QUICK_RUN, **QUIET}.items():
        if name != "max_steps":
            assert getattr(tr.args, name) == value, name
    assert tr.args.output_dir == str(tmp_path) and tr.reward_funcs == [first_digit_reward]
    assert tr.ref_model is not tr.model and len(tr.rows) == 8


def test_table_none_means_no_table(tokenizer, tmp_path):
    with pytest.raises(ValueError, match=r"needs a V\* table"):
        toy_trainer(tokenizer, tmp_path, table=None)


def test_no_test_module_defines_its_own_trainer_factory():
    """A function whose body constructs one of the library's trainers belongs in toy_setup (the
    engines' trainers, such as TRL's, are built where their tests are)."""
    from astarpo.llm.training import trainers

    bad = []
    for path in TESTS.rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("test_"):
                continue
            for call in ast.walk(node):
                func = getattr(call, "func", None)
                name = getattr(func, "id", None) or getattr(func, "attr", None) or ""
                if isinstance(call, ast.Call) and name in trainers.__all__:
                    bad.append(f"{path.relative_to(TESTS)}: {node.name} builds {name}")
    assert not bad, bad
