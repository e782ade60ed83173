"""`python -m tools.bench`: streamed decode benchmark of the deployed model, field-report style.

The field report timed streamed replies of exactly 100 tokens through the load balancer (4.0
tokens/s, 241 ms/token) and was separately bitten by a client that ignored `finish_reason:
"length"` and so hid replies that had been cut off. The package owns both lessons; this module
only runs it: `run_bench` drives the levels and rounds and logs progress, `main` wires the
arguments (`tools.bench.args`), the client (`tools.bench.client`) and the report
(`tools.bench.report`) to stdout, stderr and the exit code.

Per stream it measures time to first token (TTFT), decode tokens/s (tokens after the first over
the time after the first), ms/token and total time. Per concurrency level it reports the aggregate
tokens/s of each round (all completion tokens over the round's wall time) and the median and
spread (min..max) of every metric.

Usage:
    python -m tools.bench --endpoint http://<load-balancer>/v1 --api-key KEY
    python -m tools.bench            # endpoint and key from `pulumi stack output`

Exit codes: 0 all replies complete, 1 a request failed or a reply was cut off or short (or the
server could not be used), 2 bad arguments.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import openai

from tools.bench.args import BenchArgs, UsageError, parse_args, resolve_target
from tools.bench.client import (
    NO_KEY_PLACEHOLDER,
    BenchError,
    Clock,
    RoundResult,
    auth_message,
    discover_model,
    run_round,
)
from tools.bench.predict import comparison_lines, predictions
from tools.bench.report import STATUS_LABELS, build_report, fmt_value, render_table


def _progress(result: RoundResult, runs: int) -> str:
    """The stderr line after each round: replies ok, tokens, wall time and any bad replies."""
    records = result.records
    ok = sum(r.verdict.ok for r in records)
    bad = Counter(STATUS_LABELS[r.verdict.status] for r in records if not r.verdict.ok)
    rate = result.aggregate_tokens_per_s
    line = (
        f"[concurrency {result.concurrency}, round {result.round}/{runs}] "
        f"{ok}/{len(records)} ok, {result.completion_tokens} tokens in {result.wall_s:.2f} s"
        f" = {fmt_value(rate, 2)} tok/s aggregate"
    )
    if bad:
        line += "; " + ", ".join(f"{n} {label}" for label, n in sorted(bad.items()))
    return line


def run_bench(
    args: BenchArgs,
    endpoint: str,
    key: str | None,
    log: Callable[[str], None],
    clock: Clock = time.perf_counter,
) -> dict[str, Any]:
    """Run every level and round and return the report; raises `BenchError` on a rejected key."""
    client = openai.OpenAI(
        base_url=endpoint,
        api_key=key or NO_KEY_PLACEHOLDER,
        # A retried request would be timed as one slow reply.
        max_retries=0,
        timeout=args.timeout,
    )
    try:
        model = args.model or discover_model(client, endpoint, key)
        log(
            f"bench: {model} at {endpoint}, {args.tokens} tokens per reply, {args.runs} rounds "
            f"at concurrency {','.join(str(c) for c in args.concurrency)}"
        )
        levels: list[tuple[int, list[RoundResult]]] = []
        for concurrency in args.concurrency:
            rounds: list[RoundResult] = []
            for round_index in range(1, args.runs + 1):
                result = run_round(client, model, args, concurrency, round_index, clock)
                if any(r.error_status == 401 for r in result.records):
                    raise BenchError(auth_message(endpoint, key))
                log(_progress(result, args.runs))
                rounds.append(result)
            levels.append((concurrency, rounds))
    finally:
        client.close()
    return build_report(endpoint, model, args, levels)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry: 0 all replies complete, 1 failures or cut-off/short replies, 2 bad input."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        endpoint, key = resolve_target(args, os.environ)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        report = run_bench(args, endpoint, key, log)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted; no report", file=sys.stderr)
        return 130

    predicted = predictions(args.stack, args.concurrency, args.prompt, args.tokens)
    if args.json_output:
        print(json.dumps({**report, "plan_predictions": predicted}, indent=2))
    else:
        print("\n".join([render_table(report), *comparison_lines(report, predicted)]))
    return 0 if report["ok"] else 1
