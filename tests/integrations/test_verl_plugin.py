"""A*-PO through verl's own functions (``make test-verl``, marker ``verl``): the plugin found by
``import verl``, verl's ``apply_kl_penalty`` + ``compute_advantage`` + the registered loss equal
to :meth:`astarpo.AdvantageRegression.loss` in value and gradient (float64, tiny Qwen2 policy),
on policy and after two SGD steps off policy; verl's plain PPO loss on the same advantages,
which is not; the reward wrapper, the config checks and verl's dataset reading
``astarpo value --export-verl``'s file. verl has no CPU training backend: no Ray cluster, no run.

The measured differences go to ``$ASTARPO_VERL_REPORT`` (``make test-verl`` prints them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from toy_setup import make_tiny_model

from astarpo import AdvantageRegression
from astarpo.llm.models.logprobs import pack, sequence_logprobs
from astarpo.llm.models.toy import make_char_tokenizer

pytestmark = [pytest.mark.verl, pytest.mark.timeout(600)]

BETA2 = 0.05  # large enough that the KL term moves the loss at float64 precision
LR = 0.02  # the SGD steps' size: 0.07-0.25 nats off policy (most PPO ratios within its clip)
# The A*-PO settings of verl's command line (docs/at_scale.md shows the same overrides).
ASTARPO_OVERRIDES = {
    "algorithm.adv_estimator": "astarpo",
    "algorithm.use_kl_in_reward": "True",
    "algorithm.kl_penalty": "kl",
    "algorithm.kl_ctrl.type": "fixed",
    "algorithm.kl_ctrl.kl_coef": str(BETA2),
    "actor_rollout_ref.actor.kl_loss_coef": str(BETA2),
    "actor_rollout_ref.actor.use_kl_loss": "False",
    "actor_rollout_ref.actor.policy_loss.loss_mode": "astarpo",
    "actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-sum",
    "actor_rollout_ref.rollout.n": "1",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": "2",
}


def report(line: str) -> None:
    """Append a measured figure to ``$ASTARPO_VERL_REPORT`` (and print it)."""
    print(line)
    path = os.environ.get("ASTARPO_VERL_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def verl_config(**changes: str):
    """verl 0.9.1's own full PPO config (its generated YAML) with the A*-PO overrides."""
    import verl
    from omegaconf import OmegaConf

    base = OmegaConf.load(Path(verl.__file__).parent / "trainer/config/_generated_ppo_trainer.yaml")
    dots = {**ASTARPO_OVERRIDES, **changes}
    return OmegaConf.merge(base, OmegaConf.from_dotlist([f"{k}={v}" for k, v in dots.items()]))


def actor_config(cfg):
    """The actor's config as verl's workers build it (``omega_conf_to_dataclass``)."""
    from verl.utils.config import omega_conf_to_dataclass

    return omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)


class ToyRollout:
    """Four scored responses of a float64 tiny Qwen2 policy, with a separate reference.

    ``token_logp(model)`` gives verl's ``[B, T]`` response log-probs (right-padded responses,
    ``response_mask``); ``seq_logp(model)`` their sums, A*-PO's ``logp``."""

    def __init__(self) -> None:
        tok = make_char_tokenizer()
        self.policy = make_tiny_model(tok, seed=0).double()
        self.ref = make_tiny_model(tok, seed=1).double().requires_grad_(False)
        gen = torch.Generator().manual_seed(0)
        vocab = len(tok)
        prompts = [[5, 6, 7], [8, 9], [10, 11, 12, 13], [14]]
        lengths = [6, 4, 5, 2]
        self.responses = [torch.randint(3, vocab, (n,), generator=gen).tolist() for n in lengths]
        self.packed = pack(prompts, self.responses, tok.pad_token_id, "left")
        self.width = max(len(p) for p in prompts)  # responses start at this column
        self.reward = torch.tensor([1.0, 0.0, 1.0, 0.5], dtype=torch.float64)
        self.v_star = torch.tensor([0.4, 0.3, 0.7, 0.1], dtype=torch.float64)
        mask = self.packed.response_mask[:, self.width :]
        self.response_mask = mask.to(torch.int64)
        self.responses_tensor = self.packed.input_ids[:, self.width :]
        self.uid = np.array([f"p{i}" for i in range(len(prompts))], dtype=object)

    def token_logp(self, model) -> torch.Tensor:
        out = sequence_logprobs(model, self.packed)
        return out.token_logp[:, self.width :]

    def seq_logp(self, model) -> torch.Tensor:
        return sequence_logprobs(model, self.packed).logp


@pytest.fixture(scope="module")
def verl_modules():
    """verl's modules the tests call (imported here: collection needs no verl)."""
    import verl
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.ray_trainer import apply_kl_penalty, compute_advantage

    assert verl.__version__ == "0.9.1"
    return verl, core_algos, apply_kl_penalty, compute_advantage


def test_import_verl_registers_the_plugin_through_its_entry_point():
    """In a fresh process ``import verl`` alone puts ``astarpo`` in both registries; with verl's
    entry points off it does not, and ``VERL_USE_EXTERNAL_MODULES`` (the documented fallback)
    does it again."""
    code = (
        "import sys, verl\n"
        "from verl.trainer.ppo import core_algos as c\n"
        "print(sorted(n for n in ('astarpo',) if n in c.ADV_ESTIMATOR_REGISTRY),"
        " sorted(n for n in ('astarpo',) if n in c.POLICY_LOSS_REGISTRY),"
        " 'astarpo.integrations.verl' in sys.modules)\n"
    )

    def run(**env: str) -> str:
        full = {k: v for k, v in os.environ.items() if not k.startswith("VERL_USE_EXTERNAL")}
        full.update(env)
        out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip().splitlines()[-1]

    assert run() == "['astarpo'] ['astarpo'] True"
    assert run(VERL_USE_EXTERNAL_PLUGINS="none") == "[] [] False"
    modules = {"VERL_USE_EXTERNAL_PLUGINS": "none"}
    modules["VERL_USE_EXTERNAL_MODULES"] = "astarpo.integrations.verl"
    assert run(**modules) == "['astarpo'] ['astarpo'] True"


def _verl_advantages(toy: ToyRollout, verl_modules, old: torch.Tensor, cfg):
    """verl's route from scores to advantages: the reward wrapper's ``r - V*`` on each response's
    last token, ``apply_kl_penalty`` (fixed beta2, ``kl``), ``compute_advantage("astarpo")``."""
    from verl import DataProto

    from astarpo.integrations.verl import optimal_advantage_score

    _, core_algos, apply_kl_penalty, compute_advantage = verl_modules
    scores = torch.zeros_like(old)
    for i, r in enumerate(toy.reward.tolist()):
        score = optimal_advantage_score(lambda r=r, **_: r)  # a verl scorer returning r
        out = score("toy", "response", "gold", {"v_star": float(toy.v_star[i])})
        scores[i, int(toy.response_mask[i].sum()) - 1] = out["score"]
    data = DataProto.from_dict(
        tensors={
            "responses": toy.responses_tensor,
            "response_mask": toy.response_mask,
            "token_level_scores": scores,
            "old_log_probs": old,
            "ref_log_prob": toy.token_logp(toy.ref).detach(),
        },
        non_tensors={"uid": toy.uid},
    )
    kl_ctrl = core_algos.get_kl_controller(cfg.algorithm.kl_ctrl)
    data, _ = apply_kl_penalty(data, kl_ctrl, kl_penalty=cfg.algorithm.kl_penalty)
    data = compute_advantage(data, adv_estimator=cfg.algorithm.adv_estimator, config=cfg.algorithm)
    return data.batch["advantages"]


def _grads(loss: torch.Tensor, model) -> torch.Tensor:
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)])


def test_verls_route_is_advantage_regression_on_and_off_policy(verl_modules):
    """Loss and gradient of verl's KL-in-reward + estimator + registered loss equal
    ``AdvantageRegression(beta2).loss(..., "mean")`` (float64, 1e-9): on policy, and after two
    SGD steps (two minibatches of two responses) with the rollout's advantages and old
    log-probs kept, as verl's mini-batch updates keep them. Gradients are compared with respect
    to the token log-probs and to the policy's parameters."""
    _, core_algos, _, _ = verl_modules
    toy = ToyRollout()
    cfg = verl_config()
    actor = actor_config(cfg)
    old = toy.token_logp(toy.policy).detach()
    adv = _verl_advantages(toy, verl_modules, old, cfg)
    loss_fn = core_algos.get_policy_loss_fn("astarpo")
    objective = AdvantageRegression(beta2=BETA2)
    logp_ref = toy.seq_logp(toy.ref).detach()
    mask = toy.response_mask
    params = list(toy.policy.parameters())

    def verl_loss(token_logp: torch.Tensor, rows: slice = slice(None)) -> torch.Tensor:
        value, _ = loss_fn(
            old_log_prob=old[rows],
            log_prob=token_logp[rows],
            advantages=adv[rows],
            response_mask=mask[rows],
            loss_agg_mode=actor.loss_agg_mode,
            config=actor,
        )
        return value

    def ours(token_logp: torch.Tensor) -> torch.Tensor:
        logp = (token_logp * mask).sum(-1)  # A*-PO's sequence log-prob
        return objective.loss(logp, logp_ref, toy.reward, toy.v_star, reduction="mean")

    for phase in ("on policy", "off policy"):
        gaps = []
        for fn in (verl_loss, ours):
            token_logp = toy.token_logp(toy.policy)
            value = fn(token_logp)
            g_token, *g_params = torch.autograd.grad(value, [token_logp, *params])
            gaps.append((value.detach(), g_token, torch.cat([g.reshape(-1) for g in g_params])))
        (v1, t1, p1), (v2, t2, p2) = gaps
        loss_gap = abs(float(v1 - v2))
        token_gap, param_gap = float((t1 - t2).abs().max()), float((p1 - p2).abs().max())
        report(
            f"verl route vs AdvantageRegression.loss, {phase}: loss {float(v2):.6g}, |loss diff| "
            f"{loss_gap:.2e}, max |grad diff| {token_gap:.2e} (token log-probs; max |grad| "
            f"{float(t2.abs().max()):.3g}), {param_gap:.2e} (parameters; max |grad| "
            f"{float(p2.abs().max()):.3g}); float64, beta2 {BETA2}"
        )
        assert loss_gap < 1e-9 and token_gap < 1e-9 and param_gap < 1e-9
        if phase == "on policy":  # two SGD steps on verl's loss, one minibatch each
            with torch.no_grad():
                before = toy.seq_logp(toy.policy)
            for rows in (slice(0, 2), slice(2, 4)):
                grads = torch.autograd.grad(verl_loss(toy.token_logp(toy.policy), rows), params)
                for p, g in zip(params, grads, strict=True):
                    p.data -= LR * g
            with torch.no_grad():
                moved = (toy.seq_logp(toy.policy) - before).abs()
            report(
                f"two SGD steps (lr {LR}) moved the sequence log-probs by {float(moved.min()):.3g}"
                f" to {float(moved.max()):.3g} nats"
            )
            assert float(moved.min()) > 1e-2  # every response is off policy for real


def test_plain_ppo_on_the_same_advantages_matches_only_on_policy(verl_modules):
    """verl's ``vanilla`` PPO loss on the same advantages: its gradient times 2 beta2 equals
    A*-PO's on policy and differs after the same two SGD steps (the measured gap is reported).

    Compared as gradients with respect to the token log-probs ``[B, T]`` (float64 end to end);
    the parameter gradients are these pushed through the model's Jacobian, whose RMSNorm
    computes in float32, so their ratio is reported too but holds only to ~1e-7."""
    _, core_algos, _, _ = verl_modules
    toy = ToyRollout()
    cfg = verl_config()
    actor = actor_config(cfg)
    vanilla = {"actor_rollout_ref.actor.policy_loss.loss_mode": "vanilla"}
    ppo_actor = actor_config(verl_config(**vanilla))
    old = toy.token_logp(toy.policy).detach()
    adv = _verl_advantages(toy, verl_modules, old, cfg)
    astarpo_fn = core_algos.get_policy_loss_fn("astarpo")
    ppo_fn = core_algos.get_policy_loss_fn("vanilla")
    mask = toy.response_mask

    def loss(fn, config, rows: slice = slice(None)):
        token_logp = toy.token_logp(toy.policy)
        value, _ = fn(
            old_log_prob=old[rows],
            log_prob=token_logp[rows],
            advantages=adv[rows],
            response_mask=mask[rows],
            loss_agg_mode="seq-mean-token-sum",
            config=config,
        )
        return value, token_logp

    def grads(fn, config):
        value, token_logp = loss(fn, config)
        g_token, *g_params = torch.autograd.grad(value, [token_logp, *toy.policy.parameters()])
        return g_token, torch.cat([g.reshape(-1) for g in g_params])

    rel = {}
    for phase in ("on policy", "off policy"):
        (t_a, p_a), (t_p, p_p) = grads(astarpo_fn, actor), grads(ppo_fn, ppo_actor)
        rel[phase] = float((t_a - 2 * BETA2 * t_p).norm() / t_a.norm())
        rel_params = float((p_a - 2 * BETA2 * p_p).norm() / p_a.norm())
        cos = float(torch.nn.functional.cosine_similarity(p_a, p_p, dim=0))
        report(
            f"plain PPO (verl vanilla, clip 0.2) vs A*-PO, {phase}: ||g_astarpo - 2 beta2 g_ppo|| "
            f"/ ||g_astarpo|| = {rel[phase]:.3g} (token log-prob gradients), {rel_params:.3g} "
            f"(parameter gradients, cosine {cos:.4f})"
        )
        if phase == "on policy":
            for rows in (slice(0, 2), slice(2, 4)):  # the same two SGD steps as above
                value, _ = loss(astarpo_fn, actor, rows)
                params = list(toy.policy.parameters())
                for p, g in zip(params, torch.autograd.grad(value, params), strict=True):
                    p.data -= LR * g
    assert rel["on policy"] < 1e-12
    assert rel["off policy"] > 1e-2, rel


def test_config_checks_refuse_what_breaks_the_identity(verl_modules):
    """The estimator checks the whole config verl hands it: beta2 of the loss must be the KL
    coefficient, and so on; the loss refuses another aggregation, a KL loss, n > 1 and
    importance weights."""
    from astarpo.integrations.verl import check_verl_config, compute_astarpo_advantage

    _, core_algos, _, _ = verl_modules
    assert check_verl_config(verl_config()) == BETA2
    bad = verl_config(**{"actor_rollout_ref.actor.kl_loss_coef": "0.002"})
    with pytest.raises(
        ValueError, match=r"kl_loss_coef \(0.002\) must equal algorithm.kl_ctrl.kl_coef \(0.05\)"
    ):
        compute_astarpo_advantage(torch.zeros(2, 3), torch.ones(2, 3), config=bad.algorithm)
    for key, value, named in [
        ("algorithm.use_kl_in_reward", "False", "use_kl_in_reward must be True"),
        ("algorithm.kl_penalty", "low_var_kl", "kl_penalty must be kl"),
        ("algorithm.kl_ctrl.type", "adaptive", "kl_ctrl.type must be fixed"),
        ("actor_rollout_ref.rollout.n", "4", "rollout.n must be 1, got 4"),
        (
            "actor_rollout_ref.actor.loss_agg_mode",
            "token-mean",
            "loss_agg_mode must be seq-mean-token-sum",
        ),
    ]:
        with pytest.raises(ValueError, match=named):
            check_verl_config(verl_config(**{key: value}))
    with pytest.raises(ValueError, match="repeated uid"):
        compute_astarpo_advantage(
            torch.zeros(2, 3),
            torch.ones(2, 3),
            config=verl_config().algorithm,
            index=np.array(["a", "a"], dtype=object),
        )
    loss_fn = core_algos.get_policy_loss_fn("astarpo")
    x = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    args = {
        "old_log_prob": x.detach(),
        "log_prob": x,
        "advantages": x.detach(),
        "response_mask": torch.ones(2, 3),
    }
    actor = actor_config(verl_config())
    with pytest.raises(ValueError, match="loss_agg_mode=seq-mean-token-sum"):
        loss_fn(**args, loss_agg_mode="token-mean", config=actor)
    with pytest.raises(ValueError, match="no rollout importance weights"):
        loss_fn(
            **args,
            loss_agg_mode="seq-mean-token-sum",
            config=actor,
            rollout_is_weights=torch.ones(2, 3),
        )
    kl_loss = actor_config(verl_config(**{"actor_rollout_ref.actor.use_kl_loss": "True"}))
    with pytest.raises(ValueError, match="use_kl_loss=False"):
        loss_fn(**args, loss_agg_mode="seq-mean-token-sum", config=kl_loss)


def test_the_reward_wrapper_gives_r_minus_v_star_and_refuses_a_row_without_it(verl_modules):
    """With verl's own GSM8K scorer: ``score = r - V*``; a row without ``extra_info['v_star']``
    is refused by name, a text V* too."""
    from astarpo.integrations.verl import compute_score

    right = compute_score("openai/gsm8k", "so #### 42", "42", {"v_star": 0.25})
    wrong = compute_score("openai/gsm8k", "so #### 41", "42", {"v_star": 0.25})
    assert (right["score"], right["raw_score"], right["v_star"]) == (0.75, 1.0, 0.25)
    assert (wrong["score"], wrong["raw_score"]) == (-0.25, 0.0)
    mine = compute_score(
        "x", "so \\boxed{42}", "42", {"v_star": 0.25}, score_fn="astarpo:math_verify"
    )
    assert (mine["score"], mine["raw_score"]) == (0.75, 1.0)  # Stage 1's reward, in verl
    own = compute_score("x", "abc", "abc", {"v_star": 0.5}, score_fn="verl_scorer:score")
    assert (own["score"], own["raw_score"], own["match"]) == (0.5, 1.0, True)
    with pytest.raises(
        KeyError,
        match=r"row \(data_source='openai/gsm8k'.*has no extra_info\['v_star'\].*--export-verl",
    ):
        compute_score("openai/gsm8k", "so #### 42", "42", {"index": 3})
    with pytest.raises(KeyError, match="has no extra_info"):
        compute_score("openai/gsm8k", "so #### 42", "42", None)
    with pytest.raises(ValueError, match=r"'0\.5', not a number"):
        compute_score("openai/gsm8k", "so #### 42", "42", {"v_star": "0.5"})


def test_verls_dataset_reads_the_exported_file_and_its_reward_finds_v_star(verl_modules, tmp_path):
    """``astarpo value --export-verl``'s parquet through verl's ``RLHFDataset``: each row keeps
    its ``extra_info.v_star``, the prompt verl renders is the one Stage 1 sampled on, and the
    reward wrapper reads V* from the row as verl hands it."""
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from astarpo.cli import main
    from astarpo.integrations.verl import compute_score
    from astarpo.llm.stage1.table import ValueTable

    chat = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }} {% endfor %}"
        "{% if add_generation_prompt %}a: {% endif %}"
    )
    tok = make_char_tokenizer()
    tok.chat_template = chat
    model_dir = tmp_path / "model"
    make_tiny_model(tok).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    rows = [{"problem": f"{a}+{b}=", "answer": str(a + b)} for a, b in [(1, 2), (30, 4), (5, 61)]]
    data = tmp_path / "add.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stage1 = [
        "--model",
        str(model_dir),
        "--data",
        str(data),
        "--out",
        str(tmp_path / "v.jsonl"),
        "--n-samples",
        "2",
        "--max-new-tokens",
        "3",
        "--template",
        "none",
        "--chat-template",
        "--reward",
        "exact_match",
    ]
    assert main(["value", *stage1, "--no-progress"]) == 0
    out = tmp_path / "train.parquet"
    assert main(["value", *stage1, "--export-verl", str(out), "--data-source", "openai/gsm8k"]) == 0
    dataset = RLHFDataset(
        data_files=[str(out)],
        tokenizer=tok,
        config=OmegaConf.create({"max_prompt_length": 32, "filter_overlong_prompts": True}),
    )
    table = ValueTable.load(tmp_path / "v.jsonl")
    assert len(dataset) == len(rows)
    for i, row in enumerate(rows):
        item = dataset[i]
        text = tok.apply_chat_template(
            item["raw_prompt"], tokenize=False, add_generation_prompt=True
        )
        assert text == f"user: {row['problem']} a: "
        v_star = table.get(text).v_star
        assert item["extra_info"]["v_star"] == v_star
        score = compute_score(
            item["data_source"],
            f"#### {row['answer']}",
            item["reward_model"]["ground_truth"],
            item["extra_info"],
        )
        assert score["score"] == 1.0 - v_star


def test_the_docs_command_line_applies_to_verls_config_and_passes_its_check(verl_modules):
    """The verl command of ``docs/at_scale.md``: each override names a key of verl 0.9.1's
    generated config (``+key`` one it lacks), the A*-PO settings are the tests' own, and the
    resulting config passes :func:`check_verl_config` with the paper's beta2."""
    from omegaconf import OmegaConf

    from astarpo.integrations.verl import check_verl_config

    verl, _, _, _ = verl_modules
    page = (Path(__file__).resolve().parents[2] / "docs" / "at_scale.md").read_text()
    block = page.split("python3 -m verl.trainer.main_ppo")[1].split("```")[0]
    overrides = [w for w in block.replace("\\\n", " ").split() if "=" in w]
    base = OmegaConf.load(Path(verl.__file__).parent / "trainer/config/_generated_ppo_trainer.yaml")
    tree = OmegaConf.to_container(base, resolve=False)  # required values are "???" here

    def has(dotted: str) -> bool:
        node = tree
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    for item in overrides:
        key = item.split("=", 1)[0]
        assert has(key.lstrip("+")) != key.startswith("+"), item  # `+` adds a key, else exists
    paper = {**ASTARPO_OVERRIDES, "algorithm.kl_ctrl.kl_coef": "0.001"}
    paper["actor_rollout_ref.actor.kl_loss_coef"] = "0.001"
    given = dict(item.lstrip("+").split("=", 1) for item in overrides)
    assert {k: given.get(k) for k in paper if "micro_batch" not in k} == {
        k: v for k, v in paper.items() if "micro_batch" not in k
    }
    cfg = OmegaConf.merge(base, OmegaConf.from_dotlist([o.lstrip("+") for o in overrides]))
    assert check_verl_config(cfg) == 0.001
    assert cfg.reward.custom_reward_function.path == "pkg://astarpo.integrations.verl.reward"
