"""The efficiency study (``python -m experiments.efficiency``, short ``python -m
experiments.efficiency``): A*-PO against
the baselines on one wall-clock budget (``--protocol clock``) or for equal steps in the paper's
shape (``--protocol paper``): ``config``, ``run``, ``worker`` (one run), ``peers`` (TRL's
trainers), ``summary``, ``mechanism`` (where the time goes), ``one_pass``, ``paper`` (the paper
protocol's table and figure) and ``report``.
"""
