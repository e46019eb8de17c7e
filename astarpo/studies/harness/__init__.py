"""The harness every study is built on (one place for what the studies share).

``protocol`` (the training protocol a study's runs share: rows, reference, run configs),
``runner`` (one run per fresh process on a stated clock, the seed loop, the sweep),
``worker`` (the run's entry point), ``training`` (a run of the library's trainer), ``measure``
(memory, Stage 1's time, held-out accuracy and KL), ``curves`` (reading a run's curve),
``output`` (the output folder and ``--overwrite``), ``report`` (``NAME.json/md/png`` and their
formatting) and ``plots`` (curves at their evaluations). Statistics are
:mod:`astarpo.analysis.stats`'s, figures :mod:`astarpo.analysis.figures`'.
"""
