"""The efficiency study (``astarpo study efficiency``, short ``astarpo bench``): A*-PO against
the baselines on one wall-clock protocol: ``config``, ``run``, ``worker`` (one run), ``peers``
(TRL's trainers), ``summary``, ``mechanism`` (where the time goes), ``one_pass`` and ``report``.
"""
