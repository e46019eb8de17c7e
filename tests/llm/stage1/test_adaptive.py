"""Stage 1 with ``allocation="adaptive"``: the counts follow the rule, V* is Eq. 3 on each
prompt's own samples, the table resumes exactly, and bad settings are refused by name."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from astarpo import optimal_value
from astarpo.allocation import allocate
from astarpo.llm.stage1.config import Stage1Config
from astarpo.llm.stage1.estimate import estimate_values
from astarpo.llm.stage1.rows import ValueTableError
from astarpo.llm.stage1.table import ValueTable

sys.path.insert(0, str(Path(__file__).parents[2]))
from fakes import FakeGenerator, boxed_match, doubling_rows


def _gen(rows, **kw):
    # Odd prompts are never answered right: their pilots fail, so they get the extra samples.
    answers = {r["prompt"]: r["answer"] if i % 2 == 0 else "x" for i, r in enumerate(rows)}
    return FakeGenerator(answers, p_correct=0.9, **kw)


def _run(gen, rows, out, **kw):
    args = dict(n_samples=6, pilot_samples=2, max_samples=12, allocation="adaptive", seed=5)
    args.update(prompts_per_call=4, max_new_tokens=8, progress=False, **kw)
    return estimate_values(gen, rows, [boxed_match], Stage1Config(**args), out_path=out)


def test_counts_follow_the_rule_and_v_star_uses_each_prompts_samples(tmp_path):
    rows = doubling_rows(10)
    table = _run(_gen(rows), rows, tmp_path / "v.jsonl")
    by_prompt = {r.prompt: r for r in table}
    for start in range(0, 10, 4):  # batches of prompts_per_call = 4, in row order
        batch = [by_prompt[r["prompt"]] for r in rows[start : start + 4]]
        pilot = np.array([b.rewards[:2] for b in batch])
        want = allocate(pilot, 6 * len(batch), 12)
        assert [len(b.rewards) for b in batch] == want.tolist()
        assert sum(want) <= 6 * len(batch)
    for i, r in enumerate(rows):
        row = by_prompt[r["prompt"]]
        assert row.v_star == pytest.approx(float(optimal_value(np.array(row.rewards), 0.5)))
        if i % 2:
            assert row.pass_rate == 0 and len(row.rewards) > 6  # failed pilots get more
    prov = next(iter(table)).provenance
    assert prov["allocation"] == {"rule": "adaptive", "pilot": 2, "cap": 12}


def test_resume_after_a_kill_equals_an_uninterrupted_run(tmp_path):
    rows = doubling_rows(10)
    full = _run(_gen(rows), rows, tmp_path / "full.jsonl")
    with pytest.raises(RuntimeError, match="simulated kill"):
        _run(_gen(rows, fail_after=3), rows, tmp_path / "cut.jsonl")  # mid second batch
    assert len(ValueTable.load(tmp_path / "cut.jsonl")) == 4
    resumed = _run(_gen(rows), rows, tmp_path / "cut.jsonl")
    assert (tmp_path / "cut.jsonl").read_bytes() == (tmp_path / "full.jsonl").read_bytes()
    assert list(resumed) == list(full)
    with pytest.raises(ValueTableError, match="allocation differ"):
        _run(_gen(rows), rows, tmp_path / "cut.jsonl", pilot_samples=3)


def test_fixed_tables_record_no_allocation(tmp_path):
    rows = doubling_rows(4)
    table = _run(_gen(rows), rows, tmp_path / "v.jsonl", allocation="fixed")
    assert all(len(r.rewards) == 6 and r.provenance["allocation"] is None for r in table)


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"allocation": "greedy"}, "allocation must be 'fixed' or 'adaptive'"),
        ({"allocation": "adaptive", "pilot_samples": 9}, "pilot_samples <= n_samples"),
        ({"allocation": "adaptive", "max_samples": 4}, "raise max_samples"),
        ({"pilot_samples": 0}, "pilot_samples must be an integer >= 1"),
    ],
)
def test_bad_allocation_settings_are_named(kw, says):
    with pytest.raises(ValueError, match=says):
        Stage1Config(n_samples=8, **kw)


def test_cli_value_adaptive_on_the_toy_model(tmp_path, capsys):
    import json

    from astarpo.cli import main
    from astarpo.llm.toy.problems import addition_task

    data = tmp_path / "add.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in addition_task(4, seed=1)))
    out = tmp_path / "v.jsonl"
    args = ["value", "--model", "toy", "--data", str(data), "--out", str(out)]
    args += ["--template", "none", "--n-samples", "3", "--max-new-tokens", "3"]
    args += ["--reward", "exact_match", "--device", "cpu", "--no-progress"]
    args += ["--prompts-per-call", "2", "--allocation", "adaptive", "--pilot-samples", "2"]
    args += ["--max-samples", "5"]
    assert main(args) == 0
    rows = list(ValueTable.load(out))
    assert len(rows) == 4 and all(2 <= len(r.rewards) <= 5 for r in rows)
    assert sum(len(r.rewards) for r in rows) <= 3 * 4
    assert rows[0].provenance["allocation"] == {"rule": "adaptive", "pilot": 2, "cap": 5}
    capsys.readouterr()
