"""LLM fine-tuning with A*-PO: data and rewards, rollouts, Stage 1 values, the algorithms and
their one trainer, parallelism, evaluation and the toy tasks.

Needs the ``llm`` extra (``pip install "astarpo[llm]"``). The subpackages, from the bottom up
(each imports only those before it): ``parallel``, ``models``, ``data``, ``rewards``,
``rollout``, ``stage1``, ``algorithms``, ``training``, then ``eval`` and ``toy``; see
docs/architecture.md.

What a user calls is importable from here (``from astarpo.llm import AStarPOTrainer,
AStarPOConfig, ValueTable, estimate_values``): the trainers and every config, the trainer
extensions (``ReferenceRefresh``, ``StreamedStage1`` and their configs), Stage 1 and its V*
table, the generators, model loading and log-probabilities, data, rewards and evaluation, and the
toy tasks with their SFT reference. They load on first use, so ``import astarpo.llm`` stays
cheap; ``__all__`` lists them.
"""

from typing import Any

_LAZY = {
    # the algorithms and their configs
    "ALGORITHMS": "astarpo.llm.algorithms.registry",
    "TrainConfig": "astarpo.llm.algorithms.train_config",
    "AStarPOConfig": "astarpo.llm.algorithms.astarpo",
    "GRPOConfig": "astarpo.llm.algorithms.grpo",
    "RLOOConfig": "astarpo.llm.algorithms.grpo",
    "PPOConfig": "astarpo.llm.algorithms.ppo",
    "REBELConfig": "astarpo.llm.algorithms.rebel",
    # the trainers
    "Trainer": "astarpo.llm.training.trainer",
    "AStarPOTrainer": "astarpo.llm.training.trainers",
    "GRPOTrainer": "astarpo.llm.training.trainers",
    "RLOOTrainer": "astarpo.llm.training.trainers",
    "PPOTrainer": "astarpo.llm.training.trainers",
    "REBELTrainer": "astarpo.llm.training.trainers",
    "Schedule": "astarpo.llm.training.callbacks",
    "read_metrics": "astarpo.llm.training.metrics",
    "timed": "astarpo.llm.training.metrics",
    "peak_memory": "astarpo.llm.training.metrics",
    # Stage 1: the V* table
    "Stage1Config": "astarpo.llm.stage1.config",
    "ValueTable": "astarpo.llm.stage1.table",
    "estimate_values": "astarpo.llm.stage1.estimate",
    "lookup_v_star": "astarpo.llm.stage1.table",
    "merge_shards": "astarpo.llm.stage1.shards",
    "model_name": "astarpo.llm.stage1.provenance",
    # rollouts
    "SamplingConfig": "astarpo.llm.rollout.base",
    "derive_seed": "astarpo.llm.rollout.base",
    "HFGenerator": "astarpo.llm.rollout.hf",
    "VLLMGenerator": "astarpo.llm.rollout.vllm",
    "build_generator": "astarpo.llm.rollout.backend",
    "sample_and_score": "astarpo.llm.rollout.scored",
    # models
    "load_causal_lm": "astarpo.llm.models.loading",
    "load_pretrained_model": "astarpo.llm.models.loading",
    "load_tokenizer": "astarpo.llm.models.loading",
    "sequence_logprobs": "astarpo.llm.models.logprobs",
    "apply_lora": "astarpo.llm.models.lora",
    "AdapterDisabledReference": "astarpo.llm.models.lora",
    "parameter_bytes": "astarpo.llm.models.lora",
    "make_char_tokenizer": "astarpo.llm.models.toy",
    "make_word_tokenizer": "astarpo.llm.models.toy",
    "make_toy_model": "astarpo.llm.models.toy",
    "resolve_device": "astarpo.llm.parallel.dist",
    # data, rewards and evaluation
    "load_prompts": "astarpo.llm.data.prompts",
    "benchmark_path": "astarpo.llm.data.prompts",
    "prompt_key": "astarpo.llm.data.prompts",
    "exact_match_reward": "astarpo.llm.rewards.builtin",
    "RewardReport": "astarpo.llm.rewards.builtin",
    "MathVerifyReward": "astarpo.llm.rewards.math_verify",
    "reward_name": "astarpo.llm.rewards.scoring",
    "scratchpad_solution": "astarpo.llm.rewards.scratchpad",
    "parse_problem": "astarpo.llm.rewards.scratchpad",
    "BENCHMARKS": "astarpo.llm.eval",
    "evaluate": "astarpo.llm.eval",
    "answer_probability": "astarpo.llm.eval",
    # the toy tasks and their SFT reference
    "TASKS": "astarpo.llm.toy.tasks",
    "get_task": "astarpo.llm.toy.tasks",
    "SCRATCHPAD_DIGITS": "astarpo.llm.toy.tasks",
    "addition_task": "astarpo.llm.toy.problems",
    "scratchpad_task": "astarpo.llm.toy.problems",
    "SFTConfig": "astarpo.llm.toy.sft",
    "sft": "astarpo.llm.toy.sft",
    "cached_sft": "astarpo.llm.toy.sft",
    "check_accuracy": "astarpo.llm.toy.sft",
    # trainer extensions
    "TrainerExtension": "astarpo.llm.training.extensions",
    "ReferenceRefresh": "astarpo.llm.training.refresh",
    "RefreshConfig": "astarpo.llm.training.refresh",
    "StreamedStage1": "astarpo.llm.training.stream",
    "StreamConfig": "astarpo.llm.training.stream",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    """Import an exported name on first use (keeps ``import astarpo.llm`` light)."""
    if name in _LAZY:
        import importlib  # only on first use of a lazy name

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'astarpo.llm' has no attribute {name!r}")
