"""``python -m experiments.ladder_train``: run the ladder-train study (``--help`` lists its
flags)."""

import sys

from experiments.harness.cli import main

sys.exit(main("ladder-train"))
