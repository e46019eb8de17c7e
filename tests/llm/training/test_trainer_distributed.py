"""Stage 2 under torch.distributed (gloo, CPU, 2 processes) against one process.

Same global batch, same seeds, ``seed_chunk_size=1`` in both runs: the 2-process run must give
the same losses and final parameters as the 1-process run (up to float summation order), and
a checkpoint written by 2 processes must resume in 1 process; an FSDP2 checkpoint (sharded, one
file per rank) resumes at 1 and at 2 processes.
"""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp
from dist_setup import free_port, set_rank_env
from toy_setup import comparison_run, toy_trainer

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(180)]


# The runs compared: test_trainer's for 3 steps, seeded per prompt (the samples do not depend
# on the world size), on the CPU (a LoRA run passes fresh_ref=False: its reference is the base).
make_trainer = functools.partial(
    toy_trainer, None, **comparison_run(max_steps=3, seed_chunk_size=1, device="cpu")
)


def _worker(rank: int, world: int, port: int, out: str, overrides: dict[str, Any]) -> None:
    set_rank_env(rank, world, port)
    from astarpo.llm.parallel.dist import cleanup_distributed
    from astarpo.llm.parallel.state import full_state_dict

    resume = overrides.pop("resume", False)
    tr = make_trainer(out, **overrides)
    tr.train(resume=resume)
    torch.save(full_state_dict(tr.model), Path(out) / f"final-rank{rank}.pt")
    del tr  # the wrapped policy goes before its group (see cleanup_distributed)
    torch.distributed.barrier()
    cleanup_distributed()


def run_two(out: Path, **overrides: Any) -> None:
    mp.spawn(_worker, args=(2, free_port(), str(out), overrides), nprocs=2, join=True)


def read(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


KEYS = ("loss", "kl", "reward/mean", "advantage/mean", "grad_norm", "response_length/mean")


def assert_same_run(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for ra, rb in zip(a, b, strict=True):
        for k in KEYS:
            assert ra[k] == pytest.approx(rb[k], rel=1e-4, abs=1e-6), (ra["step"], k)


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("one")
    torch.set_num_threads(1)
    tr = make_trainer(str(out))
    tr.train()
    return out, {k: v.detach().clone() for k, v in tr.model.state_dict().items()}


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_two_processes_match_one_process(
    one_process: tuple[Path, Any], tmp_path: Path, parallel: str
) -> None:
    ref_out, ref_state = one_process
    run_two(tmp_path, parallel=parallel)
    assert_same_run(read(tmp_path), read(ref_out))
    final0 = torch.load(tmp_path / "final-rank0.pt")
    final1 = torch.load(tmp_path / "final-rank1.pt")  # FSDP2: the full state is on rank 0 only
    for name, value in ref_state.items():
        torch.testing.assert_close(final0[name], value, rtol=1e-4, atol=1e-5)
        if parallel == "ddp":
            assert torch.equal(final0[name], final1[name])  # replicas stay identical
    if parallel == "ddp":  # written once, by rank 0, in the one-process layout (no "module.")
        saved = torch.load(tmp_path / "checkpoint-3" / "model.pt")
        assert saved.keys() == ref_state.keys()
    else:  # FSDP2: each rank wrote its own shards, nothing was gathered
        files = sorted(p.name for p in (tmp_path / "checkpoint-3" / "sharded").iterdir())
        assert files == [".metadata", "__0_0.distcp", "__1_0.distcp"]
        assert not (tmp_path / "checkpoint-3" / "model.pt").exists()
    state = torch.load(tmp_path / "checkpoint-3" / "trainer_state.pt", weights_only=False)
    assert state["world_size"] == 2


def test_resume_two_process_checkpoint_in_one_process(
    one_process: tuple[Path, Any], tmp_path: Path
) -> None:
    ref_out, ref_state = one_process
    # 2 rows per rank and minibatch in 2 micro-batches: gradients reduced once (no_sync).
    run_two(tmp_path, max_steps=2, micro_batch_size=1)
    resumed = make_trainer(str(tmp_path))  # 1 process, max_steps=3
    resumed.train(resume=True)
    assert resumed.step_count == 3
    assert_same_run(read(tmp_path), read(ref_out))
    for name, value in resumed.model.state_dict().items():
        torch.testing.assert_close(value, ref_state[name], rtol=1e-4, atol=1e-5)


@pytest.mark.timeout(600)
def test_fsdp_sharded_checkpoint_resumes_at_one_and_two_processes(
    one_process: tuple[Path, Any], tmp_path: Path
) -> None:
    ref_out, ref_state = one_process
    saved = tmp_path / "saved"
    run_two(saved, max_steps=2, parallel="fsdp")  # stops after step 2 (checkpoint-2)
    assert (saved / "checkpoint-2" / "sharded" / "__1_0.distcp").exists()
    at_one, at_two = tmp_path / "at_one", tmp_path / "at_two"
    shutil.copytree(saved, at_one)
    shutil.copytree(saved, at_two)

    resumed = make_trainer(str(at_one))  # 1 process, plain model, max_steps=3
    resumed.train(resume=True)
    assert resumed.step_count == 3
    run_two(at_two, parallel="fsdp", resume=True)  # 2 processes, FSDP2 again
    final = torch.load(at_two / "final-rank0.pt")
    for out in (at_one, at_two):
        assert_same_run(read(out), read(ref_out))  # the loss curve of an uninterrupted run
        assert (out / "final" / "model.safetensors").exists()  # save_pretrained, gathered
    for name, value in ref_state.items():
        torch.testing.assert_close(resumed.model.state_dict()[name], value, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(final[name], value, rtol=1e-4, atol=1e-5)


def test_scaling_config_validation() -> None:
    from astarpo.llm.algorithms.astarpo import AStarPOConfig

    for kw, msg in [
        ({"parallel": "zero3"}, "parallel"),
        ({"parallel": "fsdp", "lora_r": 8}, "not supported"),
        ({"backend": "sglang"}, "backend"),
        ({"gpu_memory_utilization": 0.0}, "gpu_memory_utilization"),
        ({"seed_chunk_size": -1}, "seed_chunk_size"),
        ({"lora_r": -1}, "lora_r"),
    ]:
        with pytest.raises(ValueError, match=msg):
            AStarPOConfig(**kw)


def test_batch_must_split_evenly() -> None:
    from astarpo.llm.parallel.dist import DistInfo
    from astarpo.llm.training.data_parallel import DataParallel

    dp = DataParallel("ddp", info=DistInfo(0, 3))
    with pytest.raises(ValueError, match="minibatches x world_size"):
        dp.check_batch(8, 2)
    dp.check_batch(12, 2)
    assert dp.chunk == 1  # rank-invariant seeding is on by default under torchrun
    assert DataParallel("ddp", info=DistInfo()).chunk == 0
    with pytest.raises(ValueError, match="parallel"):
        DataParallel("zero3", info=DistInfo())
