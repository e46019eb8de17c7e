"""The efficiency study (``astarpo study efficiency``, short ``astarpo bench``): A*-PO against
the baselines on one wall-clock protocol.

``config`` (the settings, the runs of a seed, the ``--task``/``--quick`` presets), ``run`` (the
protocol: reference, hard subset, Stage 1, sweep, runs), ``worker`` (one run in a fresh
process), ``peers`` (TRL's trainers under the same clock), ``summary``, ``mechanism`` (where the
time goes, the cost model), ``one_pass`` (the pool no run revisits) and ``report``.
"""
