"""torch.distributed helpers on CPU with the gloo backend and 2 processes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp
from dist_setup import free_port, set_rank_env
from fakes import stage1_by_rank
from torch import nn
from toy_setup import tiny_qwen

from astarpo.llm.parallel.dist import (
    DistInfo,
    all_reduce_metrics,
    cleanup_distributed,
    dist_info_from_env,
    init_distributed,
    shard_indices,
    unwrap_model,
    wrap_model,
)
from astarpo.llm.parallel.state import full_optimizer_state, full_state_dict, load_full_state

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(120)]


# ----------------------------------------------------------------------------- pure functions


@pytest.mark.parametrize("n", [0, 1, 5, 8, 13])
@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_shard_indices_concatenate_to_range(n: int, world_size: int) -> None:
    blocks = [shard_indices(n, r, world_size) for r in range(world_size)]
    assert [i for b in blocks for i in b] == list(range(n))
    sizes = [len(b) for b in blocks]
    assert max(sizes) - min(sizes) <= 1


def test_shard_indices_bad_input() -> None:
    with pytest.raises(ValueError, match="rank"):
        shard_indices(4, 2, 2)
    with pytest.raises(ValueError, match="world_size"):
        shard_indices(4, 0, 0)
    with pytest.raises(ValueError, match="n must be"):
        shard_indices(-1, 0, 1)


def test_dist_info_from_env() -> None:
    info = dist_info_from_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"})
    assert info == DistInfo(3, 4, 1)
    assert info.distributed and not info.is_main
    assert dist_info_from_env({}) == DistInfo()
    with pytest.raises(ValueError, match="not an integer"):
        dist_info_from_env({"RANK": "x"})
    with pytest.raises(ValueError, match="rank must be"):
        dist_info_from_env({"RANK": "4", "WORLD_SIZE": "4"})


def test_fsdp_with_lora_is_refused() -> None:
    from astarpo.llm.models.lora import apply_lora

    policy = apply_lora(tiny_qwen(num_hidden_layers=1), r=2, seed=0)
    with pytest.raises(ValueError, match="parallel ddp"):
        wrap_model(policy, "fsdp", info=DistInfo(0, 2))
    assert wrap_model(policy, "fsdp", info=DistInfo()) is policy  # one process: unchanged


def test_single_process_is_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert init_distributed() == DistInfo()
    model = nn.Linear(2, 2)
    assert wrap_model(model, "ddp") is model
    assert all_reduce_metrics({"a": 1.5}) == {"a": 1.5}


# ----------------------------------------------------------------------------- 2 processes


def _make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)).double()


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(3, 8, 4, generator=g, dtype=torch.float64), torch.randn(
        3, 8, 1, generator=g, dtype=torch.float64
    )


def _train(
    model: nn.Module, rank: int, world_size: int
) -> tuple[list[float], torch.optim.Optimizer]:
    """3 SGD steps on a global batch of 8, this rank's block of it."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    xs, ys = _data()
    losses = []
    for step in range(3):
        idx = shard_indices(8, rank, world_size)
        loss = ((model(xs[step, idx]) - ys[step, idx]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(all_reduce_metrics({"loss": loss.item()})["loss"])
    return losses, opt


def _worker(rank: int, world_size: int, port: int, out: str) -> None:
    """Both strategies in the same 2 processes (process start-up dominates the cost)."""
    set_rank_env(rank, world_size, port)
    info = init_distributed()
    assert info == DistInfo(rank, world_size, rank)
    for strategy in ("ddp", "fsdp"):
        model = wrap_model(_make_model(), strategy, info=info)
        losses, _ = _train(model, rank, world_size)
        path = Path(out) / f"{strategy}.pt"
        state = full_state_dict(model)  # a collective under FSDP2: every rank calls it
        if rank == 0:
            torch.save({"model": state, "losses": losses}, path)
        torch.distributed.barrier()  # rank 0 has written the file before anyone goes on
        reduced = all_reduce_metrics({"rank": float(rank), "one": 1.0})
        if rank == 0:
            torch.save({"reduced": reduced, "losses": losses}, Path(out) / f"{strategy}-result.pt")
    del model  # the wrapper goes before its group (see cleanup_distributed)
    torch.distributed.barrier()  # both ranks are done with the group before it is destroyed
    cleanup_distributed()


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("two")
    mp.spawn(_worker, args=(2, free_port(), str(out)), nprocs=2, join=True)
    return out


@pytest.fixture(scope="module")
def one_process() -> tuple[list[float], dict[str, torch.Tensor]]:
    model = _make_model()
    losses, _ = _train(model, 0, 1)
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_processes_match_one(
    strategy: str, two_processes: Path, one_process: tuple[list[float], dict[str, torch.Tensor]]
) -> None:
    ref_losses, ref_state = one_process
    result = torch.load(two_processes / f"{strategy}-result.pt", weights_only=False)
    # Mean of the two ranks' metric: (0 + 1) / 2.
    assert result["reduced"] == {"rank": 0.5, "one": 1.0}
    # Loss of the global batch = mean of the two equal halves' losses.
    torch.testing.assert_close(result["losses"], ref_losses, rtol=1e-12, atol=1e-12)
    # The checkpoint (written once, by rank 0) holds the full, unprefixed parameters.
    restored = _make_model()
    with torch.no_grad():
        for p in restored.parameters():
            p.zero_()
    saved = torch.load(two_processes / f"{strategy}.pt", weights_only=True)
    restored.load_state_dict(saved["model"])
    assert saved["losses"] == result["losses"]
    for name, value in restored.state_dict().items():
        torch.testing.assert_close(value, ref_state[name], rtol=1e-12, atol=1e-12)


def test_checkpoint_roundtrip_single_process(tmp_path: Path) -> None:
    model = _make_model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.ones(2, 4, dtype=torch.float64)).sum().backward()
    opt.step()
    torch.save(
        {"model": full_state_dict(model), "optim": full_optimizer_state(model, opt)},
        tmp_path / "c.pt",
    )
    other = _make_model()
    other_opt = torch.optim.Adam(other.parameters(), lr=0.01)
    saved = torch.load(tmp_path / "c.pt", weights_only=True)
    load_full_state(other, other_opt, saved["model"], saved["optim"])
    for a, b in zip(model.parameters(), other.parameters(), strict=True):
        assert torch.equal(a, b)
    state = other_opt.state_dict()["state"]
    assert len(state) == 4 and int(state[0]["step"]) == 1
    assert unwrap_model(other) is other


def test_sharded_checkpoint_roundtrip_and_crafted_files_refused(tmp_path: Path) -> None:
    import pickle

    from torch.distributed.checkpoint import CheckpointException

    from astarpo.llm.parallel.state import load_sharded, save_sharded

    model = _make_model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.ones(2, 4, dtype=torch.float64)).sum().backward()
    opt.step()
    save_sharded(tmp_path / "s", model, opt)  # one process: one shard file
    other = _make_model()
    other_opt = torch.optim.Adam(other.parameters(), lr=0.01)
    load_sharded(tmp_path / "s", other, other_opt)
    for a, b in zip(model.parameters(), other.parameters(), strict=True):
        assert torch.equal(a, b)
    assert int(other_opt.state_dict()["state"][0]["step"]) == 1

    class Crafted:  # unpickling it would run a shell command
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {tmp_path / 'ran'}",))

    (tmp_path / "s" / ".metadata").write_bytes(pickle.dumps(Crafted()))
    with pytest.raises((CheckpointException, pickle.UnpicklingError), match="not checkpoint"):
        load_sharded(tmp_path / "s", other, other_opt)
    assert not (tmp_path / "ran").exists()


# ----------------------------------------------------------------------------- Stage 1 by rank


def _stage1_worker(rank: int, world_size: int, port: int, out: str) -> None:
    set_rank_env(rank, world_size, port)
    table = stage1_by_rank(Path(out) / "v.jsonl")
    torch.save(sorted((r.prompt, r.v_star) for r in table), Path(out) / f"rank{rank}.pt")
    cleanup_distributed()


def test_stage1_by_rank_merges_to_the_one_process_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from astarpo.llm.stage1.shards import part_path

    mp.spawn(_stage1_worker, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)
    assert part_path(tmp_path / "v.jsonl", 0, 2).is_file()
    assert part_path(tmp_path / "v.jsonl", 1, 2).is_file()
    rank0 = torch.load(tmp_path / "rank0.pt")
    assert rank0 == torch.load(tmp_path / "rank1.pt") and len(rank0) == 10
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    single = stage1_by_rank(tmp_path / "single.jsonl")
    assert sorted((r.prompt, r.v_star) for r in single) == rank0
