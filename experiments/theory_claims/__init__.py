"""The claims table of docs/theory.md, computed from the theory experiments' JSON: the rules
(``verdicts``), the claims (``claims``, ``claims_baselines``, ``claims_update``), their tally
(``tally``) and the page itself (``python -m experiments.theory_claims.fill_page``)."""
