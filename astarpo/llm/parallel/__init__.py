"""Processes and devices: torch.distributed setup and collectives, and the full state of wrapped
models.

``dist`` (process group, sharding, reductions, DDP/FSDP2 wrapping, device resolution),
``state`` (full model and optimizer state under any wrapping), ``watchdog`` (a rank stalled
past ``dist_timeout`` stops the job, named), ``signals`` (SIGTERM/SIGINT at a safe point) and
``progress`` (the progress bars of the long loops). The lowest layer of :mod:`astarpo.llm`:
imports only torch (and tqdm).
"""
