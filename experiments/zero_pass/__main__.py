"""``python -m experiments.zero_pass``: run the zero-pass study (``--help`` lists its flags)."""

import sys

from experiments.harness.cli import main

sys.exit(main("zero-pass"))
