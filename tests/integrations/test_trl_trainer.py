"""A*-PO on TRL's ``GRPOTrainer`` (``make test-trl``, marker ``trl``): 4-step runs on the tiny
model, with and without LoRA, whose loss at each step equals the loss astarpo's own
``AStarPOTrainer.step`` computes on the same batch and weights (its generator replays TRL's
completions, its weights are TRL's before the step, its reference is the saved base model);
V* tables of another reference or other sampling refused; the config's refusals and the pin.

The measured differences go to ``$ASTARPO_TRL_REPORT`` when it is set."""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from toy_setup import make_tiny_model, spread_reward, toy_trainer

from astarpo.cli import main
from astarpo.llm.models.toy import make_char_tokenizer
from astarpo.llm.rollout.base import Rollout
from astarpo.llm.toy.problems import addition_task

pytestmark = [pytest.mark.trl, pytest.mark.timeout(600)]

BETA2 = 0.05
STEPS, BATCH, NEW_TOKENS, SEED = 4, 4, 4, 3
ROWS = addition_task(STEPS * BATCH, seed=0)


def report(line: str) -> None:
    """Append a measured figure to ``$ASTARPO_TRL_REPORT`` (and print it)."""
    print(line)
    path = os.environ.get("ASTARPO_TRL_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


@pytest.fixture(scope="module")
def stage1(tmp_path_factory):
    """The saved tiny model (policy and reference), and the V* table of a Stage 1 run on it
    with the training rows, reward and sampling."""
    root = tmp_path_factory.mktemp("trl_astarpo")
    model = root / "model"
    tok = make_char_tokenizer()
    make_tiny_model(tok).save_pretrained(model)
    tok.save_pretrained(model)
    data = root / "add.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    table = root / "values.jsonl"
    args = ["value", "--model", str(model), "--data", str(data), "--out", str(table)]
    args += ["--n-samples", "2", "--max-new-tokens", str(NEW_TOKENS), "--template", "none"]
    assert main([*args, "--reward", "toy_setup:spread_reward", "--no-progress"]) == 0
    from astarpo.llm.stage1.table import ValueTable

    return model, ValueTable.load(table)


def trl_config(out: Path, **fields: Any):
    from astarpo.integrations.trl import AStarPOGRPOConfig

    base = {
        "output_dir": str(out),
        "max_steps": STEPS,
        "per_device_train_batch_size": BATCH,
        "max_completion_length": NEW_TOKENS,
        "learning_rate": 1e-2,
        "beta2": BETA2,
        "report_to": "none",
        "save_strategy": "no",
        "logging_steps": 1,
        "use_cpu": True,
        "shuffle_dataset": False,
        "seed": SEED,
        "gradient_checkpointing": False,
        "bf16": False,  # TRL defaults to bf16 autocast, on CPU too; astarpo runs float32 here
    }
    return AStarPOGRPOConfig(**{**base, **fields})


def epoch_order() -> list[int]:
    """The rows astarpo's trainer takes, in order (its first epoch's permutation)."""
    from astarpo.llm.training.inputs import EpochOrder

    return [int(i) for i in EpochOrder(len(ROWS), SEED).permutation(0)]


class Replay:
    """astarpo's Generator protocol, answering each prompt with TRL's completion of it."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.by_prompt: dict[str, tuple[list[int], list[int]]] = {}

    def load(self, batches: list[dict[str, Any]]) -> None:
        """The prompt and completion ids of a step's TRL micro-batches (padding removed)."""
        self.by_prompt.clear()
        keys = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask")
        rows = [row for b in batches for row in zip(*(b[k] for k in keys), strict=True)]
        for p_ids, p_mask, c_ids, c_mask in rows:
            prompt = p_ids[p_mask.bool()].tolist()
            self.by_prompt[self.tokenizer.decode(prompt)] = (prompt, c_ids[c_mask.bool()].tolist())

    def generate(self, prompts, n, sampling, seed) -> Rollout:
        assert n == 1
        ids = [self.by_prompt[p] for p in prompts]  # a KeyError: astarpo drew another prompt
        eos = self.tokenizer.eos_token_id
        return Rollout(
            prompts=list(prompts),
            prompt_ids=[p for p, _ in ids],
            response_ids=[c for _, c in ids],
            completions=[self.tokenizer.decode(c, skip_special_tokens=True) for _, c in ids],
            truncated=[len(c) == sampling.max_new_tokens and c[-1] != eos for _, c in ids],
            n=1,
        )

    def sync_weights(self, model: Any) -> None:
        pass


def run_trl(stage1, out: Path, peft_config: Any = None, **fields: Any):
    """4 steps of AStarPOGRPOTrainer; each micro-batch's loss (divided by the accumulation
    steps, as TRL backpropagates it), batch and pre-step weights."""
    from datasets import Dataset

    from astarpo.integrations.trl import AStarPOGRPOTrainer

    model_dir, table = stage1

    class Recording(AStarPOGRPOTrainer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.steps: list[tuple[float, dict[str, Any], dict[str, Any]]] = []
            super().__init__(*args, **kwargs)

        def _compute_loss(self, model, inputs):
            loss = super()._compute_loss(model, inputs)
            weights = copy.deepcopy(self.accelerator.unwrap_model(model).state_dict())
            batch = {k: v.detach().clone() for k, v in inputs.items() if hasattr(v, "detach")}
            self.steps.append((float(loss.detach()), batch, weights))
            return loss

    order = epoch_order()  # TRL takes its rows in order: astarpo's order
    dataset = Dataset.from_list([ROWS[i] for i in order])
    trainer = Recording(
        str(model_dir),
        [spread_reward],
        args=trl_config(out, **fields),
        train_dataset=dataset,
        v_star_table=table,
        processing_class=make_char_tokenizer(),
        peft_config=peft_config,
    )
    trainer.train()
    assert len(trainer.steps) == trainer.args.max_steps * trainer.args.gradient_accumulation_steps
    return trainer


def step_losses(trainer) -> list[float]:
    """The loss of each optimizer step: the sum of its micro-batches' (divided) losses."""
    k = trainer.args.gradient_accumulation_steps
    losses = [loss for loss, _, _ in trainer.steps]
    return [sum(losses[i : i + k]) for i in range(0, len(losses), k)]


def astarpo_losses(stage1, trainer, out: Path, peft_config: Any = None) -> list[float]:
    """The loss of ``AStarPOTrainer.step`` at each of TRL's steps: TRL's pre-step weights,
    TRL's completions replayed, the saved base model as reference, the same table. (The policy
    is built anew: a copy of TRL's model would keep the ``forward`` accelerate bound to it.)"""
    from transformers import AutoModelForCausalLM

    model_dir, table = stage1
    tok = make_char_tokenizer()
    replay = Replay(tok)
    policy = AutoModelForCausalLM.from_pretrained(model_dir)  # TRL's weights are loaded below
    if peft_config is not None:  # the same adapters as TRL's (the same state-dict keys)
        from peft import get_peft_model

        policy = get_peft_model(policy, copy.deepcopy(peft_config))
    ours = toy_trainer(
        tok,
        out,
        rows=ROWS,
        table=table,
        rewards=[spread_reward],
        model=policy,
        ref=AutoModelForCausalLM.from_pretrained(model_dir),
        generator=replay,
        max_steps=STEPS,
        batch_size=BATCH,
        max_new_tokens=NEW_TOKENS,
        beta2=BETA2,
        learning_rate=1e-2,
        seed=SEED,
        device="cpu",
        mixed_precision="no",
    )
    losses = []
    k = trainer.args.gradient_accumulation_steps
    for i in range(0, len(trainer.steps), k):
        micro = trainer.steps[i : i + k]
        ours.model.load_state_dict(micro[0][2])  # the weights before this optimizer step
        replay.load([batch for _, batch, _ in micro])
        losses.append(float(ours.step()["loss"]))
    return losses


@pytest.mark.parametrize("run", ["full", "lora", "accumulation"])
def test_each_steps_loss_is_astarpos_on_the_same_batch_and_weights(stage1, tmp_path, run):
    """Full fine-tuning, LoRA (TRL's reference: the adapter-disabled model) and gradient
    accumulation (2 micro-batches of 2 prompts per step)."""
    import trl

    assert trl.__version__ == "1.16.0"
    peft_config, fields = None, {}
    if run == "lora":
        from peft import LoraConfig

        peft_config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    if run == "accumulation":
        fields = {"per_device_train_batch_size": BATCH // 2, "gradient_accumulation_steps": 2}
    trainer = run_trl(stage1, tmp_path / "trl", peft_config, **fields)
    theirs = step_losses(trainer)
    ours = astarpo_losses(stage1, trainer, tmp_path / "astarpo", peft_config)
    gaps = [abs(a - b) for a, b in zip(theirs, ours, strict=True)]
    report(
        f"TRL AStarPOGRPOTrainer vs astarpo AStarPOTrainer.step ({run}"
        f"{', LoRA r=4 on q/v' if run == 'lora' else ''}), {STEPS} steps of {BATCH} prompts, "
        f"float32: TRL losses {', '.join(f'{x:.6g}' for x in theirs)}; max |diff| {max(gaps):.2e}"
    )
    assert max(gaps) < 1e-5, (theirs, ours)
    kl = [r["kl"] for r in trainer.state.log_history if "kl" in r]
    assert kl[0] == 0.0 and any(abs(x) > 1e-4 for x in kl[1:]), kl  # the policy left the ref
    if run == "lora":  # only the adapters moved; TRL's reference was the adapter-disabled base
        base = {k: v for k, v in trainer.steps[-1][2].items() if "lora_" not in k}
        first = {k: v for k, v in trainer.steps[0][2].items() if "lora_" not in k}
        assert all(bool((base[k] == first[k]).all()) for k in base)


def test_a_completion_masked_whole_adds_nothing_to_the_loss(stage1, tmp_path):
    """``mask_truncated_completions`` zeroes a truncated completion's mask (done here by hand on
    a recorded batch, as TRL does it): its row adds 0 and the loss is still divided by every row
    (TRL's per-sequence mean); the rest is :meth:`astarpo.AdvantageRegression.loss` of astarpo's
    own log-probs."""
    import torch
    from transformers import AutoModelForCausalLM

    from astarpo import AdvantageRegression
    from astarpo.llm.models.logprobs import pack, sequence_logprobs

    trainer = run_trl(stage1, tmp_path / "trl", max_steps=1)
    batch = dict(trainer.steps[0][1])
    batch["completion_mask"] = batch["completion_mask"].clone()
    batch["completion_mask"][0] = 0  # as TRL masks a truncated completion
    with torch.no_grad():
        loss = float(trainer._compute_loss(trainer.model, batch))
    keys = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask")
    rows = list(zip(*(batch[k] for k in keys), strict=True))
    packed = pack(
        [p[m.bool()].tolist() for p, m, _, _ in rows],
        [c[m.bool()].tolist() for _, _, c, m in rows],
        0,
    )
    policy = AutoModelForCausalLM.from_pretrained(stage1[0])
    policy.load_state_dict(trainer.model.state_dict())
    ref = AutoModelForCausalLM.from_pretrained(stage1[0])
    with torch.no_grad():
        per_row = AdvantageRegression(beta2=BETA2).loss(
            sequence_logprobs(policy, packed).logp,
            sequence_logprobs(ref, packed).logp,
            batch["astarpo_reward"],
            batch["astarpo_v_star"],
        )
    expected = float(per_row[1:].sum() / len(rows))
    report(f"mask_truncated_completions: loss {loss:.6g}, astarpo {expected:.6g}")
    assert abs(loss - expected) < 1e-5 and abs(float(per_row[0])) > 1e-4


def test_tables_of_another_reference_or_sampling_are_refused(stage1, tmp_path, caplog):
    from datasets import Dataset

    from astarpo.integrations.trl import AStarPOGRPOTrainer

    model_dir, table = stage1
    other = shutil.copytree(model_dir, tmp_path / "other")
    dataset = Dataset.from_list(ROWS)
    tok = make_char_tokenizer()

    def build(model: Path, **fields: Any):
        args = trl_config(tmp_path / "run", **fields)
        return AStarPOGRPOTrainer(
            str(model),
            [spread_reward],
            args=args,
            train_dataset=dataset,
            v_star_table=table,
            processing_class=tok,
        )

    with pytest.raises(ValueError, match=rf"made for another run \(model: table '{model_dir}'"):
        build(other)
    with pytest.raises(ValueError, match="sampling max_new_tokens: table 4, training 6"):
        build(model_dir, max_completion_length=6)
    with pytest.raises(ValueError, match="'v_star' column and v_star_table"):
        AStarPOGRPOTrainer(
            str(model_dir),
            [spread_reward],
            args=trl_config(tmp_path / "r"),
            train_dataset=dataset.add_column("v_star", [0.0] * len(ROWS)),
            v_star_table=table,
        )
    with pytest.raises(ValueError, match="A\\*-PO needs V\\* of every prompt"):
        AStarPOGRPOTrainer(
            str(model_dir), [spread_reward], args=trl_config(tmp_path / "r"), train_dataset=dataset
        )
    trainer = build(other, allow_v_star_mismatch=True)
    assert "mismatch accepted: model" in caplog.text
    assert trainer.train_dataset["v_star"] == [table.get(r["prompt"]).v_star for r in ROWS]
    evals = AStarPOGRPOTrainer(
        str(model_dir),
        [spread_reward],
        args=trl_config(tmp_path / "e"),
        train_dataset=dataset,
        eval_dataset={"held": Dataset.from_list(ROWS[:2])},
        v_star_table=table,
    ).eval_dataset
    assert evals["held"]["v_star"] == [table.get(r["prompt"]).v_star for r in ROWS[:2]]


def test_the_papers_filter_keeps_prompts_with_a_correct_stage1_sample(stage1, tmp_path):
    from datasets import Dataset

    from astarpo.integrations.trl import AStarPOGRPOTrainer

    model_dir, table = stage1
    kept = [r for r in ROWS if table.get(r["prompt"]).pass_rate > 0]
    assert 0 < len(kept) < len(ROWS)
    trainer = AStarPOGRPOTrainer(
        str(model_dir),
        [spread_reward],
        args=trl_config(tmp_path / "run", filter_all_wrong=True, per_device_train_batch_size=1),
        train_dataset=Dataset.from_list(ROWS),
        v_star_table=table,
        processing_class=make_char_tokenizer(),
    )
    assert trainer.train_dataset["prompt"] == [r["prompt"] for r in kept]


def test_the_config_keeps_one_generation_and_refuses_grpo_only_settings(tmp_path):
    from astarpo.integrations.trl import AStarPOGRPOConfig, check_trl_version

    args = trl_config(tmp_path, per_device_train_batch_size=3, gradient_accumulation_steps=2)
    assert (args.num_generations, type(args.num_generations), args.beta) == (1, int, BETA2)
    assert (args.generation_batch_size, args.steps_per_generation) == (6, 2)
    for fields, match in [
        ({"num_generations": 2}, "num_generations must be 1"),
        ({"beta": 0.1}, r"beta \(0.1\) is set from beta2"),
        ({"temperature": 0.7}, "temperature must be 1.0"),
        ({"loss_type": "grpo"}, "loss_type='grpo': GRPO-only settings"),
        ({"vllm_importance_sampling_correction": True}, "takes no importance weights"),
        ({"beta2": 0.0}, "beta2 must be a finite number > 0"),
    ]:
        with pytest.raises(ValueError, match=match):
            AStarPOGRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, **fields)
    assert check_trl_version("1.16.0") == "1.16.0"
    with pytest.raises(ImportError, match=r"found trl 1\.17\.0.*pip install 'trl==1\.16\.\*'"):
        check_trl_version("1.17.0")


def test_a_conversational_prompt_is_keyed_as_stage1_keys_it(tmp_path):
    """A chat-message prompt is looked up by the text ``astarpo value --chat-template`` sampled
    on (the chat template with the generation prompt); without a tokenizer it is refused."""
    from astarpo.integrations.trl import table_prompt
    from astarpo.llm.data.prompts import load_prompts

    tok = make_char_tokenizer()
    tok.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }} {% endfor %}"
        "{% if add_generation_prompt %}a: {% endif %}"
    )
    data = tmp_path / "add.jsonl"
    data.write_text(json.dumps({"problem": "1+2=", "answer": "3"}) + "\n")
    (stage1_row,) = load_prompts(data, template="none", tokenizer=tok, chat_template=True)
    messages = [{"role": "user", "content": "1+2="}]
    assert table_prompt(messages, tok) == stage1_row["prompt"] == "user: 1+2= a: "
    assert table_prompt("1+2=", None) == "1+2="
    with pytest.raises(ValueError, match="conversational prompts need processing_class"):
        table_prompt(messages, None)
