"""The v_ref ladder study (``python -m experiments.ladder``): prompt sets binned by the reference's
exact
solve probability.

``config`` (the settings and ``--quick``), ``sets`` (the candidates, their v_ref by teacher
forcing, the bins, ``ladder_prompts.jsonl``), ``passk`` (pass@k by sampling and its agreement
with v_ref), ``run`` (the study) and ``report`` (``ladder.json/md/png``).
"""
