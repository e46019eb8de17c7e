"""The v_ref ladder study (``python -m experiments.ladder``): prompt sets binned by the
reference's exact solve probability.

``config`` (what ``--quick`` sets), ``run`` (the study) and ``report`` (``ladder.md/png``). The
ladder itself (its settings, candidates, bins, pass@k by sampling) is the harness's
(:mod:`experiments.harness.ladder_sets`, :mod:`experiments.harness.ladder_build`): every study
that reads a ladder builds it the same way, or reads a finished one from disk (``--ladder``).
"""
