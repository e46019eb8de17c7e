"""What every run measures: memory, Stage 1 on its backend, the held-out evaluation (scored by
the library's evaluation, with the reward deadline)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from astarpo.llm.rewards.scoring import RewardTimeoutError
from experiments.harness import measure
from experiments.harness.protocol import Protocol


def test_peak_rss_sees_a_temporary_allocation():
    with measure.PeakRSS(interval=0.001) as probe:
        big = np.ones(64 * 2**20 // 8)  # 64 MiB, touched
        # Held until the sampling thread has run (on a loaded machine it can wait a while for a
        # core); it is freed before the probe stops, so only the sampled peak can show it.
        deadline = time.monotonic() + 10.0
        while probe.peak_mb - probe.start_mb <= 48 and time.monotonic() < deadline:
            time.sleep(0.01)
        del big
    assert probe.peak_mb - probe.start_mb > 48


def test_stage1_uses_the_configured_backend(tokenizer, tiny_model, tmp_path, monkeypatch):
    """--backend vllm reaches Stage 1 (build_generator); the HF generator stands in for vLLM
    here (the real engine is in the vllm-marked tests)."""
    from astarpo.llm import HFGenerator

    seen = []

    def fake_build(backend, model, tok, **kw):
        seen.append((backend, kw["workdir"].name))
        return HFGenerator(model, tok, kw["batch_size"])

    monkeypatch.setattr(measure, "build_generator", fake_build)
    cfg = Protocol.from_dict(dict(backend="vllm", max_new_tokens=3, n_samples=2))
    rows = [{"prompt": "1+2=", "answer": "3"}, {"prompt": "2+2=", "answer": "4"}]
    table, seconds = measure.timed_stage1(tiny_model, tokenizer, rows, cfg, tmp_path / "v.jsonl", 0)
    assert seen == [("vllm", "vllm_v")] and len(table) == 2 and seconds > 0


def test_reference_response_length_is_measured_on_the_scratchpad(tokenizer, monkeypatch):
    """evaluate_policy's length figures on a stand-in reference that writes the gold worked
    solution (70 tokens with EOS) for 6 of 10 prompts and stops early (3 tokens) or runs to
    the budget without EOS for the others: median, p90 and truncation, scored exactly."""
    from astarpo.llm import get_task, make_toy_model, scratchpad_task
    from astarpo.llm.rollout.base import Rollout

    rows = scratchpad_task(10, seed=3, digits=4)
    eos = int(tokenizer.eos_token_id)
    budget = get_task("scratchpad").max_new_tokens

    class Reference:
        def __init__(self, *a, **k):
            pass

        def generate(self, prompts, n, sampling, seed):
            resp, text, cut = [], [], []
            for i, r in enumerate(rows):
                ids = tokenizer(r["answer"], add_special_tokens=False)["input_ids"]
                if i < 6:
                    resp.append([*ids, eos]), text.append(r["answer"]), cut.append(False)
                elif i < 8:
                    resp.append([*ids[:2], eos]), text.append(r["answer"][:2]), cut.append(False)
                else:
                    resp.append(ids[:budget]), text.append(r["answer"]), cut.append(True)
            prompt_ids = tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
            return Rollout(list(prompts), prompt_ids, resp, text, cut, 1)

    monkeypatch.setattr(measure, "HFGenerator", Reference)
    model = make_toy_model(tokenizer, seed=0, hidden_size=32, intermediate_size=64,
                           num_hidden_layers=1, max_position_embeddings=256)  # fmt: skip
    cfg = Protocol.from_dict(dict(task="scratchpad", max_new_tokens=budget))
    res = measure.evaluate_policy(model, model, tokenizer, rows, cfg, 0)
    assert res["response_tokens_p50"] == 70.0  # 6 of 10 at 70, then 69 (no EOS) and 3
    assert res["response_tokens_p90"] == 70.0
    assert res["truncated_rate"] == pytest.approx(0.2)
    # Only the six complete worked solutions score; the truncated ones match the text but
    # never emitted EOS.
    assert res["sampled_accuracy"] == pytest.approx(0.6) and res["accuracy"] == 0.6


def test_the_held_out_scoring_has_the_reward_deadline(tokenizer, tiny_model, monkeypatch):
    """A reward that hangs past ``reward_timeout`` stops the evaluation (the library's scoring),
    where the bench's own scoring used to wait for it."""

    def hangs(prompts, completions, answer, **kw):
        time.sleep(2.0)
        return [0.0] * len(completions)

    monkeypatch.setattr(measure, "get_task", lambda name: SimpleNamespace(reward=hangs))
    rows = [{"prompt": "1+2=", "answer": "3"}]
    cfg = Protocol.from_dict(dict(max_new_tokens=3, reward_timeout=0.2))
    with pytest.raises(RewardTimeoutError, match=r"did not return within 0\.2 s"):
        measure.evaluate_policy(tiny_model, tiny_model, tokenizer, rows, cfg, 0)


def test_a_study_reference_names_its_stage1_table_for_the_runs_that_load_it(tmp_path, monkeypatch):
    """make_reference names its model by the folder it saves it to; a Stage 1 table made with it
    records that name as an absolute path, which a run that loads the folder from another
    directory checks without a warning (a relative `--out` failed CI's newcomer test). A model
    with no name still records none (a warning). (SFT is skipped: the naming does not depend on
    it.)"""
    from astarpo.llm import load_pretrained_model, make_char_tokenizer, make_toy_model, model_name
    from astarpo.llm.stage1.provenance import check_table_fits
    from astarpo.llm.stage1.rows import ValueTableError
    from experiments.harness import protocol

    monkeypatch.setattr(protocol, "cached_sft", lambda model, *a, **k: (model, {"steps": 0}))
    make_reference = protocol.make_reference
    cfg = Protocol.from_dict(dict(cache_dir=str(tmp_path / "cache"), n_samples=2, max_new_tokens=5))
    monkeypatch.chdir(tmp_path)
    out = Path("study")  # relative, as `--out study` gives it; the runs start elsewhere
    ref, _ = make_reference(cfg, out)
    monkeypatch.chdir("/")
    rows = [{"prompt": "01+02=", "answer": "003"}, {"prompt": "02+02=", "answer": "004"}]
    tok = make_char_tokenizer()
    table, _ = measure.timed_stage1(ref, tok, rows, cfg, tmp_path / "v.jsonl", 0)
    loaded = load_pretrained_model(str(tmp_path / out / "reference"))
    assert check_table_fits(table, model=model_name(loaded)) == []
    with pytest.raises(ValueTableError, match="model"):
        check_table_fits(table, model=str(tmp_path / "cache"))  # another folder: refused
    bare = make_toy_model(tok, seed=0)
    bare.config._name_or_path = ""
    table, _ = measure.timed_stage1(bare, tok, rows, cfg, tmp_path / "w.jsonl", 0)
    assert check_table_fits(table, model=model_name(loaded)) == [
        f"V* table {tmp_path / 'w.jsonl'} records no model; not checked."
    ]
