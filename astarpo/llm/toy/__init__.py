"""The embedded tasks and the CPU demo: the addition and scratchpad problems, the tasks by name,
supervised fine-tuning of the reference and ``astarpo demo`` (the model itself is
:mod:`astarpo.llm.models.toy`).

May import every other subpackage of :mod:`astarpo.llm`.
"""
