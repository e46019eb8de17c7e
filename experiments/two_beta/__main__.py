"""``python -m experiments.two_beta``: run the two-beta study (``--help`` lists its flags)."""

import sys

from experiments.harness.cli import main

sys.exit(main("two-beta"))
