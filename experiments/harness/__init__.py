"""The harness every study is built on: ``protocol``, ``runner`` (a run per fresh process, the
seed loop, the sweep), ``training``, ``measure``, ``output`` and ``report``; statistics and
figures are :mod:`astarpo.analysis`'s."""
