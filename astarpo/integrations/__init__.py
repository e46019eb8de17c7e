"""A*-PO inside the engines users run at scale: verl and TRL (``docs/at_scale.md``).

* :mod:`astarpo.integrations.verl`: verl's advantage estimator and policy loss registered under
  the name ``astarpo`` (loaded by verl itself from the ``verl.plugins`` entry point), and a
  reward wrapper turning any verl ``compute_score`` into ``r - V*``.
* :mod:`astarpo.integrations.trl`:
  :class:`~astarpo.integrations.trl.trainer.AStarPOGRPOTrainer`, A*-PO on TRL's ``GRPOTrainer``
  (one generation per prompt, vLLM, PEFT, accelerate).

This package sits above the library: it imports :mod:`astarpo` and :mod:`astarpo.llm`, and
nothing in the library imports it. Importing it loads neither verl nor TRL; each subpackage
imports its engine (verl lazily, TRL at import).
"""
