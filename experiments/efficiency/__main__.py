"""``python -m experiments.efficiency``: run the efficiency study (``--help`` lists its flags)."""

import sys

from experiments.harness.cli import main

sys.exit(main("efficiency"))
