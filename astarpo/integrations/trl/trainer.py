r"""A*-PO's Stage 2 on TRL's ``GRPOTrainer``: :class:`AStarPOGRPOTrainer`.

TRL keeps everything but the loss: generation (``transformers`` or vLLM, server or
colocated), the reward functions, the reference log-probs (a frozen copy loaded from the
model's path, or with ``peft_config`` the same model with its adapters disabled), accelerate /
DeepSpeed / FSDP, gradient accumulation, logging and checkpoints. Three private methods of
TRL 1.16 are overridden (hence the version pin, :func:`~astarpo.integrations.trl.config.
check_trl_version`):

* ``_calculate_rewards``: keeps the rewards of every function (gathered over processes) for
  the batch, besides returning them to TRL;
* ``_generate_and_score_completions``: adds each row's raw reward :math:`r` (the weighted sum
  TRL logs as ``reward``) and its ``v_star`` column to the batch;
* ``_compute_loss``: A*-PO's loss, :func:`astarpo.advantage_regression_loss`

.. math::

    \ell = \frac{1}{b} \sum_{i=1}^{b} \Big(\beta_2 \big(\log\pi_\theta(y_i|x_i) -
    \log\pi_{\mathrm{ref}}(y_i|x_i)\big) - \big(r_i - V^*(x_i)\big)\Big)^2

with sequence log-probs summed over the completion tokens TRL's mask keeps (a completion
masked whole by ``mask_truncated_completions`` adds 0), divided by the gradient accumulation
steps as TRL divides its own losses. TRL's group advantages are computed and ignored.
"""

from __future__ import annotations

from typing import Any

import torch
from trl import GRPOTrainer

from astarpo.integrations.trl.config import AStarPOGRPOConfig, check_trl_version
from astarpo.integrations.trl.data import V_STAR, with_v_star
from astarpo.objective import advantage_regression_loss

__all__ = ["AStarPOGRPOTrainer"]

_IMAGE_KEYS = (
    "pixel_values",
    "image_grid_thw",
    "num_images",
    "pixel_attention_mask",
    "spatial_shapes",
    "num_tiles",
    "image_sizes",
    "token_type_ids",
    "mm_token_type_ids",
    "image_position_ids",
)


class AStarPOGRPOTrainer(GRPOTrainer):
    """A*-PO's Stage 2 on TRL 1.16's ``GRPOTrainer`` (see the module docstring).

    Takes ``GRPOTrainer``'s arguments (``model`` as a path or a model, ``reward_funcs``,
    ``train_dataset``, ``eval_dataset``, ``processing_class``, ``callbacks``, ``peft_config``,
    ...) and ``v_star_table``.

    Args:
        model: The policy; its path (or ``config._name_or_path``) names the reference that the
            V* table must have been made with.
        reward_funcs: TRL reward functions (``f(prompts, completions, **columns)``) or reward
            model ids.
        args: An :class:`~astarpo.integrations.trl.config.AStarPOGRPOConfig`.
        train_dataset: A ``datasets.Dataset`` with a ``prompt`` column (text or chat
            messages), the columns the rewards read, and ``v_star`` unless ``v_star_table`` is
            given. An ``eval_dataset`` (a keyword of ``**kwargs``) gets its ``v_star`` the same
            way, without the filter.
        v_star_table: A :class:`~astarpo.llm.stage1.table.ValueTable` (checked against the run:
            reference, rewards, sampling, answers) or a ``{prompt: v_star}`` mapping; None: the
            dataset's ``v_star`` column.
        **kwargs: The other ``GRPOTrainer`` arguments.

    Raises:
        ImportError: a TRL other than 1.16.
        TypeError: ``args`` is not an ``AStarPOGRPOConfig``.
        ValueError: no V*, or a V* table made for another run (see
            :func:`~astarpo.integrations.trl.data.with_v_star`).

    Example:
        >>> trainer = AStarPOGRPOTrainer(  # doctest: +SKIP
        ...     "models/base", reward_funcs=[reward], train_dataset=dataset,
        ...     args=AStarPOGRPOConfig(output_dir="runs/a", beta2=1e-3, use_vllm=True),
        ...     v_star_table=ValueTable.load("values.jsonl"), peft_config=LoraConfig(r=16))
        >>> trainer.train()  # doctest: +SKIP
    """

    def __init__(
        self,
        model: Any,
        reward_funcs: Any,
        args: AStarPOGRPOConfig,
        train_dataset: Any = None,
        *,
        v_star_table: Any = None,
        processing_class: Any = None,
        **kwargs: Any,
    ) -> None:
        check_trl_version()
        if not isinstance(args, AStarPOGRPOConfig):
            raise TypeError(
                f"args must be an AStarPOGRPOConfig (one generation per prompt, beta2), got "
                f"{type(args).__name__}."
            )
        funcs = reward_funcs if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
        context = {"reward_funcs": funcs, "args": args, "model": model}
        context["processing_class"] = processing_class
        train_dataset = with_v_star(train_dataset, v_star_table, **context)
        evals = kwargs.pop("eval_dataset", None)  # V* too, never filtered
        if isinstance(evals, dict):
            evals = {
                k: with_v_star(d, v_star_table, **context, filter_all_wrong=False)
                for k, d in evals.items()
            }
        elif evals is not None:
            evals = with_v_star(evals, v_star_table, **context, filter_all_wrong=False)
        self._rewards_per_func: torch.Tensor | None = None
        super().__init__(
            model,
            reward_funcs,
            args=args,
            train_dataset=train_dataset,
            eval_dataset=evals,
            processing_class=processing_class,
            **kwargs,
        )

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, ids: Any) -> Any:
        """TRL's rewards ``[N, F]`` (every process's rows), kept for the loss."""
        rewards = super()._calculate_rewards(inputs, prompts, completions, ids)
        self._rewards_per_func = rewards
        return rewards

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """TRL's batch plus ``astarpo_reward`` (this process's raw rewards ``[B]``) and
        ``astarpo_v_star`` (the rows' ``v_star`` ``[B]``).

        Raises:
            ValueError: a row whose every reward function returned None (A*-PO needs a reward
                for every completion), or a row without ``v_star``.
        """
        v_star = [x.get(V_STAR) for x in inputs]
        if any(v is None for v in v_star):
            raise ValueError("a batch row has no 'v_star' (every training row needs one).")
        self._rewards_per_func = None
        out = super()._generate_and_score_completions(inputs)
        per_func = self._rewards_per_func
        assert per_func is not None  # set by _calculate_rewards during the call above
        device = self.accelerator.device
        unscorable = torch.isnan(per_func).all(dim=1)
        if bool(unscorable.any()):
            raise ValueError(
                f"{int(unscorable.sum())} completions got no reward (every reward function "
                "returned None); A*-PO regresses on r - V* and needs a reward for each."
            )
        reward = (per_func * self.reward_weights.to(per_func.device).unsqueeze(0)).nansum(dim=1)
        start = self.accelerator.process_index * len(inputs)
        out["astarpo_reward"] = reward[start : start + len(inputs)].to(device)
        out["astarpo_v_star"] = torch.tensor(v_star, dtype=torch.float32, device=device)
        return out

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        """A*-PO's loss of a micro-batch (the module docstring's formula)."""
        completion_mask = inputs["completion_mask"]
        mask = (
            completion_mask if "tool_mask" not in inputs else completion_mask * inputs["tool_mask"]
        )
        input_ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        attention_mask = torch.cat([inputs["prompt_mask"], completion_mask], dim=1)
        per_token_logps, _, aux_loss = self._get_per_token_logps_and_entropies(
            model,
            input_ids,
            attention_mask,
            inputs["completion_ids"].size(1),
            compute_aux_loss=self.aux_loss_enabled,
            **{k: inputs.get(k) for k in _IMAGE_KEYS},
        )
        logp = (per_token_logps * mask).sum(-1)
        logp_ref = (inputs["ref_per_token_logps"] * mask).sum(-1)
        reward, v_star = inputs["astarpo_reward"], inputs["astarpo_v_star"]
        # check=False: beta2 was checked by the config; the Trainer checks nothing per call.
        per_row = advantage_regression_loss(
            logp, logp_ref, reward, v_star, self.args.beta2, "none", check=False
        )
        kept = (mask.sum(-1) > 0).to(per_row.dtype)  # a completion masked whole adds 0
        loss = (per_row * kept).sum() / per_row.numel()
        mode = "train" if self.model.training else "eval"
        self._log_astarpo(mode, loss, logp - logp_ref, reward - v_star)
        normalizer = self.current_gradient_accumulation_steps if mode == "train" else 1.0
        loss = loss / normalizer
        if aux_loss is not None:  # MoE load balancing, scaled as TRL scales it
            loss = loss + self.router_aux_loss_coef * aux_loss / normalizer
        return loss

    def _log_astarpo(
        self, mode: str, loss: torch.Tensor, log_ratio: torch.Tensor, advantage: torch.Tensor
    ) -> None:
        """Log the regression's parts, averaged over processes: ``kl`` (the mean sequence
        log-ratio to the reference), ``astarpo/loss`` and ``astarpo/advantage`` (r - V*)."""
        gather = self.accelerator.gather
        self._metrics[mode]["kl"].append(gather(log_ratio.detach()).mean().item())
        self._metrics[mode]["astarpo/loss"].append(gather(loss.detach()).mean().item())
        self._metrics[mode]["astarpo/advantage"].append(gather(advantage.detach()).mean().item())
