"""LLM fine-tuning with A*-PO: data, rewards, generation, Stage 1 values, the trainer, evaluation.

Needs the ``llm`` extra (``pip install "astarpo[llm]"``). Submodules are imported on use.
"""
