"""``python -m astarpo``: the same as the ``astarpo`` command (used with ``torchrun -m``).

The entry point is decorated with ``torch.distributed.elastic``'s ``record``: under ``torchrun``
an uncaught error (``--debug``) is written to the launcher's error file, so that its failure
summary shows the root cause and traceback (:func:`astarpo.cli.main` writes the ordinary
errors there itself).
"""

from torch.distributed.elastic.multiprocessing.errors import record

from astarpo.cli import main

if __name__ == "__main__":
    raise SystemExit(record(main)())
