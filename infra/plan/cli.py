"""`python -m infra.plan`: what a stack will get, offline, before any money is spent.

    python -m infra.plan [--stack dev] [--set KEY=VALUE ...] [--json] [--render DIR]

Bad input exits 2 with one line on stderr naming the key, the rule and the fix.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from infra.plan.config import ConfigError
from infra.plan.sizing import Plan, plan
from infra.plan.stackfile import add_stack_arguments, load_stack, parse_overrides


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m infra.plan",
        description="Show what a stack will get: pods, memory, KV cache, context, speed.",
    )
    add_stack_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--render",
        metavar="DIR",
        type=Path,
        help="also write the Kubernetes objects the program applies, one YAML file each",
    )
    return parser


def format_table(p: Plan) -> str:
    """The human view: every figure with its unit, then why each derived value was chosen."""
    per_stage = ", ".join(f"{w:.2f}" for w in p.weights_gib_per_stage)
    rows = [
        ("stack", p.stack),
        ("model", p.model),
        ("nodes", f"{p.nodes} x {p.instance_type} ({p.generation}), one availability zone"),
        ("groups x stages", f"{p.replicas} x {p.stages} (one pipeline rank per node)"),
        ("node allocatable", f"{p.node_allocatable_gib:.2f} GiB"),
        ("pod memory", f"{p.pod_memory_gib:g} GiB request = limit"),
        ("pod cpu", f"{p.pod_cpu} cores request = limit"),
        ("weights per stage", f"{per_stage} GiB"),
        ("runtime overhead", f"{p.overhead_gib_per_pod:.2f} GiB per pod (largest rank)"),
        ("weight prefetch", "on (init container)" if p.weight_prefetch else "off"),
        ("guard sees", f"{p.guard_available_gib:.2f} GiB on rank {p.tightest_rank}"),
        ("kv cache", f"{p.kv_cache_bytes} bytes ({p.kv_cache_bytes / 1024**3:.2f} GiB) per rank"),
        ("max batched tokens", f"{p.max_num_batched_tokens} tokens"),
        ("max model len", f"{p.max_model_len} tokens"),
        ("kv needed at max len", f"{p.kv_needed_gib:.2f} GiB per rank"),
        ("kv cache size", f"{p.kv_cache_tokens:,} tokens (as vLLM will log it)"),
        ("max concurrency", f"{p.max_concurrency:.2f}x at {p.max_model_len:,} tokens"),
        ("decode", f"~{p.decode_tokens_per_s:.1f} tokens/s per stream (estimate)"),
        ("node disk", f"{p.node_disk_gib} GiB gp3"),
        (
            "model cache",
            f"{p.model_cache}: weights in "
            + (
                f"a {p.model_volume_gib} GiB EBS volume per rank"
                if p.model_cache == "volume"
                else f"a {p.model_volume_gib} GiB emptyDir on the node disk"
            ),
        ),
        ("cold start", f"~{p.cold_start_seconds} s; restart ~{p.warm_restart_seconds} s"),
        ("startup timeout", f"{p.startup_timeout_seconds // 60} min"),
        (
            "liveness",
            f"every {p.liveness.period_s} s, {p.liveness.failures} failures, timeout "
            f"{p.liveness.timeout_s} s; stalled after {p.liveness.stall_s} s without a token; "
            f"noticed within {p.liveness.detection_s} s",
        ),
        ("first byte", f"within {p.liveness.first_byte_s} s, else 504"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines.append("")
    lines.append("why:")
    lines.extend(f"  - {reason}" for reason in p.reasons)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        cfg = load_stack(args.stack, parse_overrides(args.overrides))
        result = plan(cfg, args.stack)
        written: list[Path] = []
        if args.render is not None:
            from infra.plan.render import render_stack

            written = render_stack(cfg, result, args.render)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(format_table(result))
        if written:
            print(f"\nrendered {len(written)} objects into {args.render}")
    return 0
