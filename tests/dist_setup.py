"""What the multi-process tests share: a free port for the rendezvous, and the environment of
one rank of a 2-process gloo group (plain functions, so that spawned workers can call them)."""

from __future__ import annotations

import os
import socket


def free_port() -> int:
    """A TCP port of 127.0.0.1 that is free now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def set_rank_env(rank: int, world: int, port: int) -> None:
    """The ``torchrun`` variables of rank ``rank`` of ``world`` (rendezvous on ``port`` of
    127.0.0.1), and one torch thread (the ranks share the test machine's cores)."""
    import torch

    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    torch.set_num_threads(1)
