"""astarpo: A*-PO, policy optimization by regression onto the optimal advantage.

The core objective (numpy and torch), the online-gradient-descent oracle, and the config
helpers every config and command line of the package is made with (:mod:`astarpo.config`:
fields declared once with their help, flags and ``--config`` files made from them). Importing
this package loads numpy, scipy.special and torch only; the LLM pipeline lives in
:mod:`astarpo.llm` and the bandit theory in :mod:`astarpo.theory`.
"""

from astarpo.allocation import allocate
from astarpo.commands.config_file import add_config_argument, apply_config_file
from astarpo.commands.paths import check_output
from astarpo.config import (
    add_field_arguments,
    config_fields,
    doc_field,
    field_values,
    flag_of,
    name_flags,
)
from astarpo.objective import (
    AdvantageRegression,
    advantage_regression_loss,
    optimal_advantage,
    optimal_policy,
    optimal_value,
)
from astarpo.oracle import OGDState, OnlineGradientDescent

__version__ = "0.1.0"

__all__ = [
    "AdvantageRegression",
    "OGDState",
    "OnlineGradientDescent",
    "__version__",
    "add_config_argument",
    "add_field_arguments",
    "advantage_regression_loss",
    "allocate",
    "apply_config_file",
    "check_output",
    "config_fields",
    "doc_field",
    "field_values",
    "flag_of",
    "name_flags",
    "optimal_advantage",
    "optimal_policy",
    "optimal_value",
]
