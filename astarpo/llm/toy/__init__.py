"""The embedded tiny model and the CPU demo: a character tokenizer, a ~1M-parameter Qwen2-style
model, the addition task, supervised fine-tuning of the reference and ``astarpo demo``.

May import every other subpackage of :mod:`astarpo.llm`.
"""
