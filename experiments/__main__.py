"""``python -m experiments``: list the studies and how to run each."""

from experiments.registry import STUDIES

for study in STUDIES.values():
    print(f"python -m {study.package}: {study.summary}")
