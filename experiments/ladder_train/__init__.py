"""The ladder-train study (``python -m experiments.ladder_train``): who learns, per bin of log10
v_ref.

``config`` (the settings, the rates, the runs and ``--quick``), ``run`` (the ladder, Stage 1
once, the sweep, the runs; what runs in a process), ``summary`` (the gains, the verdicts, the
review's 2x2, the thresholds) and ``report`` (``ladder_train.json/md/png``).
"""
