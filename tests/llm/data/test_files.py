"""The one reader of append-only JSONL files (the V* table, metrics.jsonl): a torn last line is
dropped, corruption before it is an error naming the file and line."""

from __future__ import annotations

import json
import logging
import re

import pytest

from astarpo.llm.data.files import read_jsonl_log
from astarpo.llm.stage1.rows import ValueTableError


def test_values_come_with_their_line_numbers_and_the_valid_length(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"a": 1}\n\n[2]\n')
    values, good = read_jsonl_log(path)
    assert values == [(1, {"a": 1}), (3, [2])]
    assert good == path.stat().st_size


def test_a_torn_last_line_is_dropped_with_a_warning_and_left_out_of_the_length(tmp_path, caplog):
    path = tmp_path / "log.jsonl"
    whole = json.dumps({"step": 1}).encode() + b"\n"
    path.write_bytes(whole + b'{"step": 2, "lo')
    with caplog.at_level(logging.WARNING):
        values, good = read_jsonl_log(path)
    assert values == [(1, {"step": 1})]
    assert good == len(whole)  # a resuming writer cuts the file here
    assert f"{path}:2: dropping a truncated last line" in caplog.text


def test_a_torn_last_line_followed_by_blank_lines_is_still_the_last(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"step": 1}\n{"st\n\n')
    values, good = read_jsonl_log(path)
    assert values == [(1, {"step": 1})] and good == len(b'{"step": 1}\n')


@pytest.mark.parametrize("bad", [b"not json", b"\xff\xfe"])
def test_a_corrupt_line_before_the_last_is_an_error_of_the_given_type(tmp_path, bad):
    path = tmp_path / "values.jsonl"
    path.write_bytes(b'{"a": 1}\n' + bad + b'\n{"a": 3}\n')
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}:2: corrupt metrics line"):
        read_jsonl_log(path, what="metrics line")
    with pytest.raises(ValueTableError, match=rf"{re.escape(str(path))}:2: corrupt line"):
        read_jsonl_log(path, ValueTableError)


def test_the_table_and_the_metrics_reader_share_it(tmp_path, caplog):
    from astarpo.llm.stage1.rows import read_table_rows
    from astarpo.llm.training.metrics import read_metrics

    metrics = tmp_path / "metrics.jsonl"
    metrics.write_bytes(b'{"step": 1}\n{"step": 2}\n{"ste')
    assert [r["step"] for r in read_metrics(metrics)] == [1, 2]
    metrics.write_bytes(b'{"step": 1}\n{"ste\n{"step": 3}\n')
    with pytest.raises(ValueError, match=r"metrics\.jsonl:2: corrupt metrics line"):
        read_metrics(metrics)
    table = tmp_path / "values.jsonl"
    table.write_bytes(b"{torn")
    assert read_table_rows(table) == ([], 0)
    table.write_bytes(b"{torn\n{}\n")
    with pytest.raises(ValueTableError, match=r"values\.jsonl:1: corrupt line"):
        read_table_rows(table)
