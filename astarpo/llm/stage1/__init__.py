"""Stage 1 of A*-PO: the V* table on disk and its estimation from N reference samples.

``table`` (:class:`~astarpo.llm.stage1.table.ValueTable`: rows, loading, saving, lookup),
``config`` (:class:`~astarpo.llm.stage1.config.Stage1Config`: N, beta1, sampling, ...) and
``estimate`` (:func:`~astarpo.llm.stage1.estimate.estimate_values`: sharded, merged, resumed,
and by rank under ``torchrun``). Every V* is :func:`astarpo.optimal_value`. May import
the subpackages below it: parallel, models, data, rewards, rollout.
"""
