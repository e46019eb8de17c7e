"""astarpo: A*-PO, policy optimization by regression onto the optimal advantage.

The core objective (numpy and torch) and the online-gradient-descent oracle. Importing this
package loads numpy, scipy.special and torch only; the LLM pipeline lives in
:mod:`astarpo.llm` and the bandit theory in :mod:`astarpo.theory`.
"""

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
    "advantage_regression_loss",
    "optimal_advantage",
    "optimal_policy",
    "optimal_value",
]
