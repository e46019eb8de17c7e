"""A fake ``vllm`` module (``LLM``, ``SamplingParams``, the outputs) and a digit tokenizer, for the
tests of the vLLM backend and of the trainer's vLLM sync that must run without vLLM."""

from __future__ import annotations

import types
from typing import Any

import torch

EOS = 1


class FakeTokenizer:
    """Characters -> ids 3..; id 1 is EOS, 0 is pad."""

    eos_token_id = EOS
    pad_token_id = 0

    def __call__(self, texts: list[str], add_special_tokens: bool = False) -> dict[str, Any]:
        self.add_special_tokens = add_special_tokens
        return {"input_ids": [[3 + ord(c) - ord("0") for c in t] for t in texts]}

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        assert skip_special_tokens
        return "".join(chr(ord("0") + i - 3) for i in ids if i >= 3)


class FakeModel:
    def __init__(self) -> None:
        self.loaded: list[tuple[str, torch.Tensor]] = []

    def load_weights(self, weights: Any) -> set[str]:
        # vLLM copies into its own parameters; so does the fake.
        self.loaded.extend((name, t.clone()) for name, t in weights)
        return {name for name, _ in self.loaded}


def make_fake_vllm(*, with_apply_model: bool = True) -> types.ModuleType:
    mod = types.ModuleType("vllm")
    calls: dict[str, Any] = {"llm_init": None, "generate": [], "reset": 0}
    mod.calls = calls  # type: ignore[attr-defined]

    class SamplingParams:
        def __init__(self, **kwargs: Any) -> None:
            self.kwargs = kwargs

    class Completion:
        def __init__(self, token_ids: list[int], finish_reason: str) -> None:
            self.token_ids = token_ids
            self.finish_reason = finish_reason

    class RequestOutput:
        def __init__(self, outputs: list[Completion]) -> None:
            self.outputs = outputs

    class LLM:
        def __init__(self, **kwargs: Any) -> None:
            calls["llm_init"] = kwargs
            self.model = FakeModel()
            if not with_apply_model:
                worker = types.SimpleNamespace(model_runner=types.SimpleNamespace(model=self.model))
                self.llm_engine = types.SimpleNamespace(
                    model_executor=types.SimpleNamespace(driver_worker=worker)
                )

        def generate(self, requests: list[dict[str, Any]], params: list[Any], use_tqdm: bool):
            calls["generate"].append((requests, params))
            outs = []
            for req, p in zip(requests, params, strict=True):
                k = p.kwargs
                samples = []
                for j in range(k["n"]):
                    # Sample j: j + 1 digit tokens then EOS, or truncated at max_tokens.
                    body = [4 + (k["seed"] + j + len(req["prompt_token_ids"])) % 5] * (j + 1)
                    if len(body) + 1 <= k["max_tokens"]:
                        samples.append(Completion([*body, EOS], "stop"))
                    else:
                        samples.append(Completion(body[: k["max_tokens"]], "length"))
                outs.append(RequestOutput(samples))
            return outs

        def reset_prefix_cache(self) -> bool:
            calls["reset"] += 1
            return True

    if with_apply_model:

        def apply_model(self: Any, func: Any) -> list[Any]:
            return [func(self.model)]

        LLM.apply_model = apply_model  # type: ignore[attr-defined]

    mod.SamplingParams = SamplingParams  # type: ignore[attr-defined]
    mod.LLM = LLM  # type: ignore[attr-defined]
    return mod
