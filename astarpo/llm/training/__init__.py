"""The Stage 2 trainer: one loop for every registered algorithm.

``trainer`` (:class:`~astarpo.llm.training.trainer.Trainer`: loop, step, checkpoints, resume),
``trainers`` (``AStarPOTrainer``, ``GRPOTrainer``, ... as named entry points over the
registry), ``extensions`` (the typed hooks of the variants that change what a step trains on:
``refresh``, a moving reference, and ``stream``, Stage 1 per step), ``update`` (the minibatches
of a step, one optimizer step), ``checkpoint`` (the
on-disk layout), ``final_model`` (the saved Hugging Face folder), ``preemption`` (a stop signal
answered after a step), ``data_parallel`` (the hooks that make the same step run under
``torchrun``) and ``metrics`` (logging, timing, peak memory). May import every
subpackage below it: parallel, models, data, rewards, rollout, stage1, algorithms.
"""
