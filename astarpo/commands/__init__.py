"""One module per ``astarpo`` CLI verb, each with ``add_arguments(parser)`` and ``run(args)``.

They are imported lazily by :mod:`astarpo.cli`, so ``astarpo theory`` never loads transformers.
"""
