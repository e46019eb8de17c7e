"""``python -m experiments.regime CELL_DIR ... --out DIR``: read the cells (each a finished
paper-protocol efficiency study) and write ``regime.json``, ``regime.md`` and ``regime.png``."""

import argparse
import sys

from experiments.regime.report import build, to_markdown, write
from experiments.regime.summary import load_cells

parser = argparse.ArgumentParser(prog="python -m experiments.regime", description=__doc__)
parser.add_argument("cells", nargs="+", help="folders of finished paper-protocol studies")
parser.add_argument("--out", required=True, help="where regime.json/md/png are written")
args = parser.parse_args()
try:
    result = build(load_cells(args.cells))
except ValueError as e:
    sys.exit(f"error: {e}")
write(result, args.out)
print(to_markdown(result))
