"""The adaptive-N study (``python -m experiments.adaptive_n``): Stage 1's V* error, fixed N
against the adaptive allocation, on the v_ref ladder where the exact V* is known."""
