"""``python -m experiments.refresh``: run the refresh study (``--help`` lists its flags)."""

import sys

from experiments.harness.cli import main

sys.exit(main("refresh"))
