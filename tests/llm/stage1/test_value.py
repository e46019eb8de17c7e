"""Stage 1: the V* table round trip, resume, shards, corruption and the official import."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from astarpo import optimal_value
from astarpo.llm.data.prompts import prompt_key
from astarpo.llm.rewards.builtin import exact_match_reward
from astarpo.llm.rollout.base import Generator, SamplingConfig
from astarpo.llm.stage1.config import Stage1Config
from astarpo.llm.stage1.estimate import estimate_values
from astarpo.llm.stage1.rows import ValueTableError
from astarpo.llm.stage1.shards import merge_shards, parse_shard, part_path
from astarpo.llm.stage1.table import MissingPromptError, ValueTable

sys.path.insert(0, str(Path(__file__).parents[2]))
from fakes import FakeGenerator, boxed_match, doubling_rows

SAMPLING = SamplingConfig(max_new_tokens=8, temperature=1.0)


def _gen(rows, **kw):
    return FakeGenerator({r["prompt"]: r["answer"] for r in rows}, **kw)


def _run(gen, rows, out, shard=None, **kw):
    args = dict(n_samples=6, beta1=0.5, max_new_tokens=SAMPLING.max_new_tokens, seed=3)
    args.update(prompts_per_call=3, progress=False, **kw)
    config = Stage1Config(**args)
    return estimate_values(gen, rows, [boxed_match], config, out_path=out, shard=shard)


def test_fake_generator_follows_protocol():
    assert isinstance(_gen(doubling_rows(1)), Generator)


def test_table_values_and_round_trip(tmp_path):
    rows = doubling_rows()
    table = _run(_gen(rows), rows, tmp_path / "v.jsonl")
    assert len(table) == 10
    for r in table:
        rw = np.array(r.rewards)
        assert rw.shape == (6,)
        assert r.v_star == pytest.approx(float(optimal_value(rw, 0.5)), abs=1e-15)
        assert r.pass_rate == pytest.approx(rw.mean())
        assert r.key == prompt_key(r.prompt)
        assert r.provenance["n_samples"] == 6 and r.provenance["beta1"] == 0.5
        assert r.provenance["sampling"]["temperature"] == 1.0
        assert r.provenance["reward"] == ["boxed_match"]
    loaded = ValueTable.load(tmp_path / "v.jsonl")
    prompts = [r["prompt"] for r in rows]
    np.testing.assert_array_equal(loaded.v_star(prompts), table.v_star(prompts))
    assert loaded.v_star(prompts).dtype == np.float64
    loaded.save(tmp_path / "v.parquet")
    again = ValueTable.load(tmp_path / "v.parquet")
    assert list(again) == list(loaded)
    # A rerun with everything done generates nothing.
    gen = _gen(rows)
    _run(gen, rows, tmp_path / "v.jsonl")
    assert gen.calls == []


def test_resume_after_kill_equals_uninterrupted_run(tmp_path):
    rows = doubling_rows(10)
    full = _run(_gen(rows), rows, tmp_path / "full.jsonl")
    with pytest.raises(RuntimeError, match="simulated kill"):
        _run(_gen(rows, fail_after=2), rows, tmp_path / "cut.jsonl")
    assert len(ValueTable.load(tmp_path / "cut.jsonl")) == 6  # two batches of 3 written
    gen = _gen(rows)
    resumed = _run(gen, rows, tmp_path / "cut.jsonl")
    assert len(gen.calls) == 2  # the two remaining batches (4 prompts)
    assert list(ValueTable.load(tmp_path / "cut.jsonl")) == list(full)
    assert list(resumed) == list(full)


def test_torn_last_line_is_dropped_and_rerun_completes(tmp_path, caplog):
    rows = doubling_rows(6)
    out = tmp_path / "v.jsonl"
    _run(_gen(rows), rows, tmp_path / "full.jsonl")
    data = (tmp_path / "full.jsonl").read_bytes()
    out.write_bytes(data[: len(data) - 40])  # a kill in the middle of the last row
    assert len(ValueTable.load(out)) == 5
    assert "truncated last line" in caplog.text
    _run(_gen(rows), rows, out)
    assert out.read_bytes() == data


def test_corrupt_or_missing_table_is_a_clear_error(tmp_path):
    with pytest.raises(ValueTableError, match=r"does not exist.*astarpo value"):
        ValueTable.load(tmp_path / "none.jsonl")
    rows = doubling_rows(4)
    _run(_gen(rows), rows, tmp_path / "v.jsonl")
    lines = (tmp_path / "v.jsonl").read_text().splitlines(keepends=True)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "{not json\n" + "".join(lines[2:]))
    with pytest.raises(ValueTableError, match=r"bad.jsonl:2: corrupt"):
        ValueTable.load(bad)
    row = json.loads(lines[0])
    row["v_star"] = "x"
    bad.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueTableError, match=r"bad.jsonl:1: non-numeric"):
        ValueTable.load(bad)
    row = json.loads(lines[0])
    row["prompt"] = "changed"
    bad.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueTableError, match="sha256"):
        ValueTable.load(bad)
    bad.write_text("")
    with pytest.raises(ValueTableError, match="no rows"):
        ValueTable.load(bad)


@pytest.mark.parametrize("form", ["parquet", "exported"])
@pytest.mark.parametrize(
    ("provenance", "says"),
    [
        ("{n_samples: 6}", "provenance is not valid JSON (Expecting property name enclosed in "),
        ('["not", "a", "mapping"]', "provenance must be a JSON object, got list"),
    ],
)
def test_a_rows_broken_provenance_names_the_file_row_and_fix(form, provenance, says, tmp_path):
    """A .parquet table and an exported folder hold each row's provenance as JSON text."""
    table = _run(_gen(doubling_rows(3)), doubling_rows(3), tmp_path / "v.jsonl")
    records = [r.to_json() for r in table]
    for rec in records:
        rec["provenance"] = json.dumps(rec["provenance"])
    records[1]["provenance"] = provenance
    if form == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = tmp_path / "v.parquet"
        pq.write_table(pa.Table.from_pylist(records), path)
    else:
        from datasets import Dataset

        path = tmp_path / "exported"
        Dataset.from_list(records).save_to_disk(str(path))
    with pytest.raises(ValueTableError) as err:
        ValueTable.load(path)
    text = str(err.value)
    assert text.startswith(f"{path}:row 1: the row's ") and says in text, text
    assert "regenerate the table with `astarpo value`, or restore the file" in text
    if "JSON (" in says:
        assert "at line 1 column 2)" in text


def test_missing_prompt_error(tmp_path):
    rows = doubling_rows(2)
    table = _run(_gen(rows), rows, tmp_path / "v.jsonl")
    with pytest.raises(MissingPromptError, match=r"'9\+9=' is not in the V\* table .*v.jsonl"):
        table.v_star(["0+0=", "9+9="])
    with pytest.raises(KeyError):
        table.get("x" * 200)
    assert "0+0=" in table and "9+9=" not in table


def test_changed_settings_refuse_to_resume(tmp_path):
    rows = doubling_rows(3)
    _run(_gen(rows), rows, tmp_path / "v.jsonl")
    with pytest.raises(ValueTableError, match="beta1"):
        _run(_gen(rows), rows, tmp_path / "v.jsonl", beta1=1.0)


def test_filter_all_wrong_and_select(tmp_path):
    rows = doubling_rows(8)
    half = FakeGenerator({r["prompt"]: r["answer"] if i < 4 else "x" for i, r in enumerate(rows)},
                         p_correct=1.0)  # fmt: skip
    table = _run(half, rows, tmp_path / "v.jsonl", filter_all_wrong=True)
    assert [r.prompt for r in table] == [r["prompt"] for r in rows[:4]]
    assert len(ValueTable.load(tmp_path / "v.jsonl")) == 8
    assert len(ValueTable.load(tmp_path / "v.jsonl", drop_all_wrong=True)) == 4
    full = ValueTable.load(tmp_path / "v.jsonl")
    assert full.select([*rows, {"prompt": "other"}]) == rows


def test_shards_merge_to_the_full_set(tmp_path):
    rows = doubling_rows(12)
    out = tmp_path / "v.jsonl"
    sizes = []
    for i in range(3):
        part = _run(_gen(rows), rows, out, shard=(i, 3))
        sizes.append(len(part))
        assert part_path(out, i, 3).is_file()
    assert sum(sizes) == 12
    merged = merge_shards(out, 3, rows)
    assert len(ValueTable.load(out)) == 12 == len(merged)
    part_path(out, 1, 3).unlink()
    with pytest.raises(ValueTableError, match="part 1 of 3 is missing"):
        merge_shards(out, 3)
    assert parse_shard("1/4") == (1, 4) and parse_shard(None) is None
    with pytest.raises(ValueError, match="i/k"):
        parse_shard("1-4")
    with pytest.raises(ValueError, match="0 <= i < k"):
        parse_shard("4/4")


def test_merge_detects_incomplete_shard(tmp_path):
    rows = doubling_rows(8)
    out = tmp_path / "v.jsonl"
    for i in range(2):
        _run(_gen(rows), rows, out, shard=(i, 2))
    p = part_path(out, 0, 2)
    p.write_text("".join(p.read_text().splitlines(keepends=True)[:-1]))
    with pytest.raises(ValueTableError, match="lacks 1 prompts"):
        merge_shards(out, 2, rows)


def test_from_official(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    recs = [
        {
            "prompt": [{"role": "user", "content": f"q{i}"}],
            "reward_model": {"ground_truth": str(i)},
            **{f"eval_{j}": float((i + j) % 2) for j in range(4)},
        }
        for i in range(3)
    ]
    pq.write_table(pa.Table.from_pylist(recs), tmp_path / "off.parquet")
    table = ValueTable.from_official(tmp_path / "off.parquet", beta1=0.5)
    row = table.get("q1")
    assert row.rewards == (1.0, 0.0, 1.0, 0.0) and row.answer == "1"
    assert row.v_star == pytest.approx(float(optimal_value(np.array([1.0, 0, 1, 0]), 0.5)))
    assert row.provenance["source"] == "official" and row.provenance["n_samples"] == 4
    with pytest.raises(ValueTableError, match="eval_0"):
        ValueTable.from_official([{"prompt": "x", "eval_1": 1.0}], beta1=0.5)


def test_exact_match_end_to_end(tmp_path):
    rows = [{"prompt": "1+1=", "answer": "2"}]

    class Always2(FakeGenerator):
        pass

    gen = Always2({"1+1=": "2"}, p_correct=1.0)
    table = estimate_values(
        gen,
        rows,
        [exact_match_reward],
        Stage1Config(
            n_samples=4, beta1=0.5, max_new_tokens=SAMPLING.max_new_tokens, progress=False
        ),
        out_path=tmp_path / "v.jsonl",
    )
    # "\\boxed{2}" is not an exact match of "2": all rewards 0, V* = 0.
    assert table.get("1+1=").rewards == (0.0,) * 4 and table.get("1+1=").v_star == 0.0


def test_resume_with_the_toy_model_is_bitwise(tmp_path, tokenizer, tiny_model):
    from astarpo.llm.rollout.hf import HFGenerator
    from astarpo.llm.toy.problems import addition_task

    rows = [{"prompt": r["problem"], "answer": r["answer"]} for r in addition_task(6, seed=0)]
    gen = HFGenerator(tiny_model, tokenizer, batch_size=16)
    kw = {"config": Stage1Config(n_samples=3, max_new_tokens=3, prompts_per_call=2, progress=False)}
    full = estimate_values(gen, rows, [exact_match_reward], out_path=tmp_path / "a.jsonl", **kw)

    class Killed(HFGenerator):
        calls = 0

        def generate(self, *a, **k):
            Killed.calls += 1
            if Killed.calls > 1:
                raise RuntimeError("killed")
            return super().generate(*a, **k)

    with pytest.raises(RuntimeError, match="killed"):
        estimate_values(
            Killed(tiny_model, tokenizer),
            rows,
            [exact_match_reward],
            out_path=tmp_path / "b.jsonl",
            **kw,
        )
    assert len(ValueTable.load(tmp_path / "b.jsonl")) == 2
    estimate_values(gen, rows, [exact_match_reward], out_path=tmp_path / "b.jsonl", **kw)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert len(full) == 6


def test_cli_value_shards_merge_and_import(tmp_path, capsys):
    from astarpo.cli import main
    from astarpo.llm.toy.problems import addition_task

    data = tmp_path / "add.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in addition_task(6, seed=1)))
    out = tmp_path / "v.jsonl"
    base = ["value", "--model", "toy", "--data", str(data), "--out", str(out), "--template", "none"]
    base += ["--n-samples", "2", "--max-new-tokens", "3", "--reward", "exact_match"]
    base += ["--device", "cpu", "--no-progress", "--prompts-per-call", "2"]
    assert main(base) == 0
    assert "6 prompts" in capsys.readouterr().out
    for i in range(2):
        assert main([*base, "--shard", f"{i}/2"]) == 0
    capsys.readouterr()
    assert main(["value", "--out", str(tmp_path / "m.jsonl"), "--merge", "2"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: part 0 of 2 is missing"), err
    merged = tmp_path / "merged.jsonl"
    for i in range(2):
        part_path(out, i, 2).rename(part_path(merged, i, 2))
    assert (
        main(
            [
                "value",
                "--out",
                str(merged),
                "--merge",
                "2",
                "--data",
                str(data),
                "--template",
                "none",
            ]
        )
        == 0
    )
    # Sharded batches differ from unsharded ones, so compare prompts (in dataset order).
    assert [r.key for r in ValueTable.load(merged)] == [r.key for r in ValueTable.load(out)]
    rec = {"prompt": "1+1=", "answer": "2", "eval_0": 1, "eval_1": 0}
    (tmp_path / "off.jsonl").write_text(json.dumps(rec) + "\n")
    off_out = tmp_path / "off_v.jsonl"
    assert (
        main(["value", "--out", str(off_out), "--import-official", str(tmp_path / "off.jsonl")])
        == 0
    )
    assert ValueTable.load(off_out).get("1+1=").rewards == (1.0, 0.0)


def test_kill_at_any_byte_then_resume_gives_the_same_file(tmp_path):
    rows = doubling_rows(5)
    full = tmp_path / "full.jsonl"
    _run(_gen(rows), rows, full)
    data = full.read_bytes()
    n_full = len(data.splitlines())
    out = tmp_path / "cut.jsonl"
    for cut in range(0, len(data) + 1, 7):
        out.write_bytes(data[:cut])
        if cut:  # loading a prefix never fails: torn last line dropped, complete rows kept
            complete = data[:cut].count(b"\n") + (data[:cut].endswith(b"}}") and 1)
            try:
                assert len(ValueTable.load(out)) == complete
            except ValueTableError as e:
                assert complete == 0 and "no rows" in str(e)
        _run(_gen(rows), rows, out)
        assert out.read_bytes() == data, cut
    assert n_full == 5


# --------------------------------------------------------- an empty table is refused


def test_filter_all_wrong_that_drops_every_prompt_is_refused(tmp_path):
    rows, out = doubling_rows(8), tmp_path / "v.jsonl"
    with pytest.raises(ValueError, match=r"dropped all 8 prompts: each one's 6 reference samples"):
        _run(_gen(rows, p_correct=0.0), rows, out, filter_all_wrong=True)
    assert len(ValueTable.load(out)) == 8  # the file keeps every row
    with pytest.raises(ValueTableError, match=r"drop_all_wrong leaves no row \(all 8 prompts"):
        ValueTable.load(out, drop_all_wrong=True)
    with pytest.raises(ValueError, match=r"dropped all 8 prompts.*nothing was written"):
        _run(_gen(rows, p_correct=0.0), rows, None, filter_all_wrong=True)


def test_an_empty_table_is_not_exported_and_an_empty_export_is_named(tmp_path):
    datasets = pytest.importorskip("datasets")
    with pytest.raises(ValueTableError, match="has no rows; nothing to export"):
        ValueTable([]).export(tmp_path / "exp")
    assert not (tmp_path / "exp").exists()
    empty = tmp_path / "empty"
    datasets.Dataset.from_list([]).save_to_disk(str(empty))  # what the old export wrote
    with pytest.raises(ValueTableError, match=f"'{empty}' is an exported folder with no rows"):
        ValueTable.load(empty)


def test_cli_filter_all_wrong_on_an_all_wrong_pool_exits_1_and_exports_nothing(tmp_path, capsys):
    from astarpo.cli import main

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"problem": f"{i}+{i}=", "answer": "9"}) + "\n"
                            for i in range(4)))  # fmt: skip
    exp = tmp_path / "exp"
    argv = ["value", "--model", "toy", "--data", str(data), "--template", "none", "--out",
            str(tmp_path / "v.jsonl"), "--export", str(exp), "--n-samples", "2",
            "--max-new-tokens", "2", "--reward", "exact_match", "--no-progress",
            "--filter-all-wrong", "true"]  # fmt: skip
    assert main(argv) == 1  # two tokens cannot hold "9" + EOS... nor does the toy know it
    err = capsys.readouterr().err
    assert "dropped all 4 prompts" in err and "--filter-all-wrong false" in err, err
    assert not exp.exists()


def test_a_relative_model_folder_is_recorded_as_its_absolute_path(tmp_path, monkeypatch):
    """A table made with ``provenance={"model": "ref"}`` (a folder relative to the working
    directory) records the folder's absolute path, so a run started from another directory,
    which loads it by its absolute path, matches it; a hub id and "toy" (the embedded model,
    even beside a folder named toy) are kept as given."""
    from astarpo.llm.stage1.provenance import check_table_fits

    rows = doubling_rows()
    (tmp_path / "ref").mkdir()
    monkeypatch.chdir(tmp_path)
    config = Stage1Config(n_samples=2, max_new_tokens=8, progress=False)
    table = estimate_values(_gen(rows), rows, [boxed_match], config, provenance={"model": "ref"})
    assert next(iter(table)).provenance["model"] == str(tmp_path / "ref")
    monkeypatch.chdir("/")
    assert check_table_fits(table, model=str(tmp_path / "ref")) == []
    hub = estimate_values(_gen(rows), rows, [boxed_match], config, provenance={"model": "org/ref"})
    assert next(iter(hub)).provenance["model"] == "org/ref"
    (tmp_path / "toy").mkdir()
    monkeypatch.chdir(tmp_path)
    toy = estimate_values(_gen(rows), rows, [boxed_match], config, provenance={"model": "toy"})
    assert next(iter(toy)).provenance["model"] == "toy"
