"""The efficiency study's peers: TRL's ``GRPOTrainer`` and experimental ``A2POTrainer`` on its
protocol (``python -m experiments.efficiency --peers trl``; the ``bench-trl`` extra).
:func:`run_peer` is one peer
run in the study worker's process (the same reference copy, tokenizer, pool and sampling, the
reward :func:`~astarpo.llm.rewards.builtin.exact_match_reward`); :class:`PeerClock` keeps the
study's clock inside TRL's loop, A2PO's Stage 1 counted in it; :data:`DIFFERENCES` lists what
still differs. ``trl`` is imported only inside the functions.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

from transformers import PrinterCallback, ProgressCallback, TrainerCallback

from astarpo.llm import Schedule, ValueTable, exact_match_reward, timed
from experiments.efficiency.config import PEER_ARMS, EfficiencyConfig, stage2_seconds

__all__ = [
    "DIFFERENCES",
    "TRL_VERSION",
    "PeerClock",
    "check_peers",
    "import_peer",
    "peer_info",
    "run_peer",
    "trl_reward",
]

#: The TRL release the peers were written and tested against (the ``bench-trl`` extra pins it).
TRL_VERSION = "1.16.0"

INSTALL = (
    f"`--peers trl` needs TRL {TRL_VERSION}: install torch==2.13.0 first (pip would otherwise "
    'pull a CUDA build), then `pip install -e ".[bench-trl]"`; or run from the venv that `make '
    "trl-install` builds (.venv-trl)."
)


def check_peers(peers: tuple[str, ...]) -> None:
    """Fail (``RuntimeError``) before any run when ``trl`` is requested but not importable, or
    not :data:`TRL_VERSION`."""
    if "trl" not in peers:
        return
    if importlib.util.find_spec("trl") is None:
        raise RuntimeError(f"trl is not installed. {INSTALL}")
    import trl

    if trl.__version__ != TRL_VERSION:
        raise RuntimeError(
            f"trl {trl.__version__} is installed, the peers are pinned to it. {INSTALL}"
        )


def import_peer(arm: str) -> None:
    """Import the trainer of peer run ``arm`` (and ``datasets``): paid before the worker reads
    its resident memory, not inside the run's peak."""
    import datasets  # noqa: F401

    if arm == "trl_grpo":
        import trl
    else:
        import trl.experimental.a2po  # noqa: F401


def trl_reward(
    prompts: list[str], completions: list[str], answer: list[Any], **_: Any
) -> list[float]:
    """:func:`~astarpo.llm.rewards.builtin.exact_match_reward` in TRL's reward signature (TRL
    passes the dataset columns, ``answer`` here, and its own extras as keyword arguments)."""
    return [r or 0.0 for r in exact_match_reward(prompts, completions, answer)]


#: ``(setting, TRL, ours)``: where TRL's trainers, as the bench runs them, differ from the
#: library's runs; the last row is what the bench sets to match ours. ``{B}``, ``{G}``, ``{BG}``
#: and ``{GB}`` are the batch size, group size, their product and the generation batch.
DIFFERENCES = (
    ("GRPO loss aggregation", "loss_type='dapo': token losses over the active tokens of the "
     "batch", "loss_aggregation='token_mean' (the same on one process)"),
    ("GRPO advantages", "scale_rewards='group': (r - group mean) / (group std + 1e-4)",
     "scale_rewards=True: (r - group mean) / (group std + std_eps=1e-4)"),
    ("GRPO KL penalty / clipping / iterations", "beta=0.0 (no reference model), epsilon=0.2, "
     "num_iterations=1", "kl_coef=0, clip_eps=0.2, update_epochs=1 (the same)"),
    ("GRPO rollout batch", "per_device_train_batch_size={BG} completions = {B} prompts x "
     "num_generations={G}, one generate call", "batch_size={B} prompts x group_size={G}, "
     "generate calls of {GB} rows"),
    ("A2PO Stage 1 (V*)", "inside train(), on the training pool, V* = beta1 * log mean "
     "exp(r / beta1), kept in memory; in the sweep the library's table is handed to it",
     "estimate_values: the same estimator, a table on disk, reused by the sweep"),
    ("A2PO all-wrong prompts", "filter_all_incorrect=True by default", "all prompts kept (the "
     "paper); the bench sets filter_all_incorrect=False"),
    ("A2PO loss", "mean over the batch of (beta2 * log pi/pi_ref - (r - V*))^2, sequence "
     "log-probs up to and including the first EOS", "advantage_regression_loss: the same"),
    ("A2PO reference model", "its own frozen copy of the policy (the evaluation's reference "
     "is another)", "one frozen reference for training and evaluation"),
    ("data order", "TRL's samplers (GRPO: RepeatSampler, A2PO: the Trainer's RandomSampler), "
     "seeded", "the library's order for the seed (the same for every library run)"),
    ("training clock", "wall time of Trainer.train's loop from on_train_begin, evaluation "
     "excluded (data loading and TRL's bookkeeping included)", "the sum of the library "
     "trainer's step times"),
    ("set to match", "lr_scheduler_type='constant', no warmup, weight_decay 0, max_grad_norm "
     "1.0, activation (gradient) checkpointing off (TRL's default on), bf16 only where ours "
     "uses it (TRL's default on), temperature 1, top_p 1, top_k 0, no vLLM, no logging or "
     "checkpoints, the learning rate from the bench's sweep", "constant AdamW learning rate, "
     "clip 1.0, no checkpointing"),
)  # fmt: skip


def peer_info(cfg: EfficiencyConfig) -> dict[str, Any]:
    """``{"version", "differences"}``: :data:`DIFFERENCES` with ``cfg``'s sizes, as
    ``{setting: {"trl": ..., "ours": ...}}``."""
    b, g = cfg.train.batch_size, cfg.grpo.group_size
    sizes = {"B": b, "G": g, "BG": b * g, "GB": cfg.train.generation_batch_size}
    rows = {k: {"trl": t.format(**sizes), "ours": o.format(**sizes)} for k, t, o in DIFFERENCES}
    return {"version": TRL_VERSION, "differences": rows}


class PeerClock(TrainerCallback):
    """The study's clock in a ``transformers`` Trainer: stops once ``seconds`` (Stage 1's
    ``stage1_s()`` included) are spent; calls ``eval_fn(model)``, outside the clock, at the
    start, every ``eval_every`` training seconds and after the last step."""

    def __init__(self, seconds: float, eval_every: float, eval_fn: Any, stage1_s: Any) -> None:
        self.seconds, self.eval_every = seconds, eval_every
        self.eval_fn, self.stage1 = eval_fn, stage1_s
        self.evals: list[dict[str, Any]] = []
        self.stage1_s = self.train_s = self.eval_s = self.t0 = 0.0
        self.steps, self.stopped, self.schedule = 0, False, Schedule(10**9)

    def elapsed(self) -> float:
        """Training seconds since the loop began, evaluations excluded (frozen once stopped)."""
        return self.train_s if self.stopped else time.perf_counter() - self.t0 - self.eval_s

    def _evaluate(self, model: Any) -> None:
        t, e0 = self.elapsed(), time.perf_counter()
        self.evals.append({**self.eval_fn(model), "step": self.steps, "stage2_time": t})
        self.eval_s += time.perf_counter() - e0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
        """Read Stage 1's time, set the Stage 2 budget, start the clock and evaluate."""
        self.stage1_s = float(self.stage1())
        budget = stage2_seconds("the TRL run", self.seconds, self.stage1_s)
        self.schedule = Schedule(10**9, budget, 0, self.eval_every)
        self.t0 = time.perf_counter()
        self._evaluate(kw["model"])
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
        """Stop once the budget is spent (after a last evaluation); evaluate on the schedule."""
        self.steps = int(state.global_step)
        t = self.elapsed()
        if self.schedule.done(self.steps, t):
            self.train_s, self.stopped = t, True
            control.should_training_stop = True
            self._evaluate(kw["model"])
        elif self.schedule.evaluate_now(self.steps, t):
            self._evaluate(kw["model"])
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
        """Freeze the clock; evaluate when the last step was not (the data ran out first)."""
        if not self.stopped:
            self.train_s, self.stopped = self.elapsed(), True
            if self.evals[-1]["step"] != self.steps:
                self._evaluate(kw["model"])
        return control


def _trainer(arm: str, spec: dict[str, Any], cfg: EfficiencyConfig, policy: Any, tok: Any, cb: Any):
    """The TRL trainer of ``arm`` with the study's settings (see :func:`peer_info`)."""
    from datasets import Dataset

    rows = spec["train"]
    data = {"prompt": [r["prompt"] for r in rows], "answer": [str(r["answer"]) for r in rows]}
    cuda = next(policy.parameters()).is_cuda  # the worker placed it on the study's device
    common: dict[str, Any] = dict(
        output_dir=str(Path(spec["out"]) / "trl"),
        seed=int(spec["seed"]),
        learning_rate=float(spec["lr"]),
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        max_steps=10**9,
        gradient_accumulation_steps=1,
        activation_checkpointing=False,  # TRL defaults to True
        bf16=cfg.train.mixed_precision == "bf16" or (cfg.train.mixed_precision == "auto" and cuda),
        use_cpu=not cuda,
        temperature=1.0,
        top_p=1.0,
        max_completion_length=cfg.train.max_new_tokens,
        report_to="none",
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        remove_unused_columns=False,
    )
    if arm == "trl_grpo":
        from trl import GRPOConfig as config_type
        from trl import GRPOTrainer as trainer_type

        own: dict[str, Any] = dict(
            per_device_train_batch_size=cfg.train.batch_size * cfg.grpo.group_size,
            num_generations=cfg.grpo.group_size,
            beta=0.0,
            top_k=0,
            use_vllm=False,
        )
    else:
        from trl.experimental.a2po import A2POConfig as config_type  # type: ignore[assignment, unused-ignore]
        from trl.experimental.a2po import A2POTrainer as trainer_type  # type: ignore[assignment, unused-ignore]

        own = dict(
            per_device_train_batch_size=cfg.train.batch_size,
            num_value_samples=cfg.stage1.n_samples,
            beta1=cfg.stage1.beta1,
            beta2=cfg.astarpo.beta2,
            filter_all_incorrect=False,
        )
    return trainer_type(
        policy,
        reward_funcs=trl_reward,
        args=config_type(**common, **own),
        train_dataset=Dataset.from_dict(data),
        processing_class=tok,
        callbacks=[cb],
    )


def run_peer(
    spec: dict[str, Any], cfg: EfficiencyConfig, policy: Any, tok: Any, eval_fn: Any
) -> dict[str, Any]:
    """One TRL run of ``spec["arm"]`` (one of ``PEER_ARMS["trl"]``); without ``stage1_inside``
    (the sweep) A2PO gets the library's Stage 1 table ``values``.

    Returns:
        The trainer's fields of a run's result: ``evals``, ``stage1_s``, ``train_s``,
        ``clock_s``, ``steps``, ``pool``, ``samples_per_prompt``, ``phases`` (``stage1``,
        ``generate``, ``rest``).
    """
    arm = spec["arm"]
    if arm not in PEER_ARMS["trl"]:
        raise ValueError(f"unknown peer arm {arm!r}; expected one of {PEER_ARMS['trl']}.")
    spent = {"time/generate": 0.0, "time/stage1": 0.0}
    clock = PeerClock(
        float(spec["seconds"]), cfg.train.eval_every_seconds, eval_fn, lambda: spent["time/stage1"]
    )
    trainer = _trainer(arm, spec, cfg, policy, tok, clock)
    if arm == "trl_a2po":
        if not spec["stage1_inside"]:  # the sweep reuses the library's Stage 1, as ours does
            trainer._optimal_values = {r.prompt: r.v_star for r in ValueTable.load(spec["values"])}
        trainer._estimate_optimal_values = timed(spent, "stage1")(trainer._estimate_optimal_values)
    for quiet in (PrinterCallback, ProgressCallback):  # no per-run log lines
        trainer.remove_callback(quiet)
    policy.generate = timed(spent, "generate")(policy.generate)
    trainer.train()
    return {
        "evals": [{**e, "time": clock.stage1_s + e["stage2_time"]} for e in clock.evals],
        "stage1_s": clock.stage1_s,
        "train_s": clock.train_s,
        "clock_s": clock.stage1_s + clock.train_s,
        "steps": clock.steps,
        "pool": len(trainer.train_dataset),
        "samples_per_prompt": cfg.grpo.group_size if arm == "trl_grpo" else 1,
        "phases": {
            "stage1": clock.stage1_s,
            "generate": spent["time/generate"],
            "rest": clock.train_s - spent["time/generate"],
        },
    }
