"""The lab: what measures this project's own claims, kept out of the installed package.

Run from a clone of the repository (the folder is not installed): ``python -m experiments``
lists the studies, ``python -m experiments.NAME --quick`` runs one
(:data:`~experiments.registry.STUDIES`; ``NAME`` is the study's package: ``efficiency``,
``zero_pass``, ``two_beta``, ``ladder``, ``adaptive_n``, ``refresh``, ``ladder_train``).

- ``harness/``: what the studies share (the protocol, the runner of one process per run, the
  output folder, measurement and report helpers, the command line);
- one subpackage per study: its config, ``run``, ``report`` (and a worker where its runs need
  one);
- ``benchmarks/``: scripts that time one thing against another in one process;
- ``theory_claims/``: the claims table of docs/theory.md, computed from the theory
  experiments' JSON (``python -m experiments.theory_claims.fill_page``);
- ``tests/``: the lab's own tests.

The rule between the two houses: the lab imports only names the library exports, and the
library never imports the lab (``tests/test_architecture.py`` checks both).
"""
