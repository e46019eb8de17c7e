"""``python -m experiments.adaptive_n``: run the adaptive-n study (``--help`` lists its flags)."""

import sys

from experiments.harness.cli import main

sys.exit(main("adaptive-n"))
