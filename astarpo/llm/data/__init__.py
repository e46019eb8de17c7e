"""Data: prompt files and templates, rows, hub datasets and appending to log-like files.

``prompts`` (reading JSONL/Parquet, templates, prompt keys, ``repeat_columns``), ``files`` (data
files read with file:line in every error; appends whole or not at all), ``hub``
(``save_to_disk`` folders and hub datasets), ``rows`` (a ``Dataset`` or dicts as rows; chat
prompts rendered) and ``word_problems`` (seeded arithmetic word problems, a task a small
pretrained model learns from). May import :mod:`astarpo.llm.parallel` and :mod:`astarpo.llm.models`.
"""
