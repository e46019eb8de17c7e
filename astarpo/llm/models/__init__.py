"""Models: loading, GGUF checkpoints, LoRA, log-probs and the embedded toy model.

``loading`` (the one ``from_pretrained``: local-only for a directory, a hub id downloaded only
when named, a GGUF checkpoint dequantized), ``gguf`` (which names are GGUF checkpoints: a
``.gguf`` file, a folder holding one, a packaged name such as ``smollm2``), ``convert`` (a GGUF
checkpoint saved as a model folder with its provenance), ``fit`` (data the model cannot read:
unknown characters, prompts too long), ``lora`` (adapters and the adapter-disabled reference),
``logprobs`` (sequence log-probs of packed batches) and ``toy`` (the character tokenizer and the
~1M-parameter Qwen2-style model). May import :mod:`astarpo.llm.parallel`; nothing else of
:mod:`astarpo.llm`.
"""
