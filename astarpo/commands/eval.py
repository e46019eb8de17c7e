"""``astarpo eval``: accuracy of a model on benchmark files (greedy pass@1, sampled avg@k).

``astarpo eval --model DIR --benchmarks math500,amc2023`` prints the paper-style table;
``--data FILE`` evaluates any prompt file; ``--out results.json`` also writes the numbers.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from astarpo.commands.common import (
    add_data_arguments,
    add_generation_arguments,
    add_model_arguments,
    add_reward_arguments,
    build_rewards,
    load_model,
    load_tokenizer,
    make_generator,
    needs_hf_model,
    refuse_existing,
)
from astarpo.commands.console import format_table
from astarpo.commands.fields import Repeatable
from astarpo.commands.paths import check_output
from astarpo.config import CommaList
from astarpo.llm.data.files import standard_json
from astarpo.llm.eval import (
    PROMPTS_PER_CALL,
    SAMPLED,
    Benchmark,
    evaluate_benchmarks,
    resolve_benchmarks,
)
from astarpo.llm.rollout.base import SamplingConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``astarpo eval``."""
    add_model_arguments(parser)
    add_generation_arguments(parser, gpu_memory_utilization=0.9)  # evaluation runs alone
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--data", action=Repeatable, help="a prompt file to evaluate (repeatable)")
    src.add_argument(
        "--benchmarks",
        type=CommaList(),
        help="comma-separated benchmarks shipped with the package: math500, minerva, "
        "olympiadbench, amc2023, aime24, aime25, hmmt25_feb, hmmt25_nov, or 'all'",
    )
    add_data_arguments(parser)
    add_reward_arguments(parser)
    parser.add_argument(
        "--avg",
        help="responses per prompt: an int for all, or name=k,... per benchmark (default: "
        "amc2023=32, others 1 = greedy pass@1)",
    )
    # One default per setting: the paper's evaluation sampling (astarpo.llm.eval).
    budget, temperature, top_p = SAMPLED.max_new_tokens, SAMPLED.temperature, SAMPLED.top_p
    parser.add_argument(
        "--max-new-tokens", type=int, default=budget, help=f"per response ({budget})"
    )
    parser.add_argument(
        "--temperature", type=float, default=temperature, help=f"for avg@k, k > 1 ({temperature})"
    )
    parser.add_argument("--top-p", type=float, default=top_p, help=f"for avg@k, k > 1 ({top_p})")
    parser.add_argument("--seed", type=int, default=0, help="seed of sampled responses (0)")
    parser.add_argument(
        "--prompts-per-call",
        type=int,
        default=PROMPTS_PER_CALL,
        help=f"prompts per generate call ({PROMPTS_PER_CALL}; --batch-size is prompts per "
        "optimizer step, on train and bench)",
    )
    parser.add_argument("--out", help="also write the results as JSON here")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    parser.add_argument("--overwrite", action="store_true", help="let --out replace a file")


def parse_avg(spec: str | None) -> tuple[int | None, dict[str, int]]:
    """``"8"`` -> ``(8, {})``; ``"amc2023=32,aime24=8"`` -> ``(None, {...})``.

    Raises:
        SystemExit: a usage error for anything else, a k below 1 included.
    """
    if spec is None:
        return None, {}
    out: dict[str, int] = {}
    if spec.isdigit():
        out[""] = int(spec)
    else:
        for part in spec.split(","):
            name, _, text = part.partition("=")
            if not name.strip() or not text.isdigit():
                raise SystemExit(f"error: --avg {spec!r}: expected an int or name=k,...")
            out[name.strip()] = int(text)
    for name, k in out.items():
        if k < 1:
            where = f" for {name}" if name else ""
            raise SystemExit(
                f"error: --avg {spec!r}: k{where} is {k}; give k >= 1 responses per prompt (1 = "
                "greedy pass@1, k > 1 = sampled avg@k)."
            )
    return (out.pop(""), {}) if "" in out else (None, out)


def run(args: argparse.Namespace) -> int:
    """Evaluate, print the table, optionally write JSON."""
    if not args.data and not args.benchmarks:
        raise SystemExit("error: give --data FILE or --benchmarks LIST.")
    refuse_existing(args.out, args.overwrite)  # before the (long) evaluation
    check_output(args.out, "--out", folder=False)
    every, per_name = parse_avg(args.avg)
    benchmarks = resolve_benchmarks(args.benchmarks) if args.benchmarks else []
    if benchmarks:  # canonical names (aliases like amc23 allowed); unknown names raise
        per_name = {resolve_benchmarks([n])[0].name: k for n, k in per_name.items()}
    if needs_hf_model(args):
        model, tokenizer = load_model(args.model, args.device, args.dtype)
    else:  # vLLM loads the saved model itself
        model, tokenizer = None, load_tokenizer(args.model)
    gen = make_generator(args, model, tokenizer)
    rewards = build_rewards(args.reward, args.math_verify_timeout, "math_verify")
    sets = benchmarks or [Benchmark.from_file(path) for path in args.data]
    options = {
        "tokenizer": tokenizer,
        "chat_template": args.chat_template,
        "system_prompt": args.system_prompt,
        "max_prompt_tokens": args.max_prompt_tokens,
    }
    if not benchmarks:  # the columns of a file of the user's (the packaged ones are known)
        options |= {"problem_key": args.problem_key, "answer_key": args.answer_key}
    results = evaluate_benchmarks(
        gen,
        sets,
        rewards,
        k={b.name: every for b in sets} if every else per_name,
        greedy=SamplingConfig(args.max_new_tokens, 0.0, 1.0),
        sampled=SamplingConfig(args.max_new_tokens, args.temperature, args.top_p),
        seed=args.seed,
        batch_size=args.prompts_per_call,
        limit=args.limit,
        template=args.template,
        progress=not args.no_progress,
        prompt_options=options,
        reward_timeout=args.reward_timeout,
    )
    print(format_table(results))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(
            json.dumps(standard_json({"model": args.model, "results": results}), indent=2) + "\n"
        )
    return 0
