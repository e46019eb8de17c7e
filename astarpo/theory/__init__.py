"""Exact log-linear contextual bandits that test the paper's theory (Theorem 1)."""
