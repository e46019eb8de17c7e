"""``python -m astarpo``: the same as the ``astarpo`` command (used with ``torchrun -m``)."""

from astarpo.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
