"""``python -m experiments.ladder``: run the ladder study (``--help`` lists its flags)."""

import sys

from experiments.harness.cli import main

sys.exit(main("ladder"))
