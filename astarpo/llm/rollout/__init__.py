"""Rollouts: the :class:`~astarpo.llm.rollout.base.Generator` protocol and its backends.

``base`` (sampling settings, the rollout, the stop set, the one seed derivation), ``hf`` (Hugging
Face ``generate``), ``vllm`` (a colocated vLLM engine; ``vllm_cpu``, its settings on vLLM's CPU
build), ``chunked`` (rank-invariant sampling and gathering under ``torchrun``), ``backend``
(choosing one; a reference model in place of a generator) and ``scored`` (``sample_and_score``:
generate, then score with the rows' columns; what Stage 1, the trainer and evaluation run on a
batch). May import :mod:`astarpo.llm.parallel`, :mod:`astarpo.llm.models`, :mod:`astarpo.llm.data`
and :mod:`astarpo.llm.rewards`.
"""
