"""Rollouts: the :class:`~astarpo.llm.rollout.base.Generator` protocol and its backends.

``base`` (sampling settings, the rollout, the stop set), ``seeds`` (the one seed derivation),
``hf`` (Hugging Face ``generate``), ``vllm`` (a colocated vLLM engine), ``chunked``
(rank-invariant sampling and gathering under ``torchrun``) and ``backend`` (choosing one). May
import :mod:`astarpo.llm.parallel`; nothing else of :mod:`astarpo.llm`.
"""
