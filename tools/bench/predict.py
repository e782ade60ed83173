"""The plan's predictions beside what the benchmark measured, so the first deploy calibrates the
throughput model (README, "Feeding measurements back").

Predictions come from the stack's plan (`infra.plan`): decode tokens/s per stream and in aggregate
at each measured concurrency (each stream at its prompt plus the reply), and time to first token
for the prompt. The prompt's token count is estimated from its words (about 1.3 tokens per word);
the measurement is what counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from infra.plan import catalog, prefill, throughput
from infra.plan.config import ConfigError
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack

TOKENS_PER_WORD = 1.3


def predictions(
    stack: str, concurrency: tuple[int, ...], prompt: str, tokens: int
) -> dict[str, Any] | None:
    """What the stack's plan predicts for this benchmark; None when the stack does not plan."""
    try:
        cfg = load_stack(stack)
        p = plan(cfg, stack)
    except ConfigError:
        return None
    profile = cfg.profile()
    instance = catalog.INSTANCE_TYPES[p.instance_type]
    loads = throughput.stage_loads(profile, [(r.sliding_layers, r.full_layers) for r in p.ranks])
    slow, mid, fast = prefill.nodes(instance, p.pod_cpu, profile.weights)
    work = prefill.stage_work(profile, [(r.sliding_layers, r.full_layers) for r in p.ranks])
    prompt_tokens = max(1, math.ceil(len(prompt.split()) * TOKENS_PER_WORD))
    context = prompt_tokens + tokens
    levels = []
    for n in concurrency:
        point = throughput.decode_point(profile, loads, mid.bandwidth, mid.flops, n, context)
        levels.append(
            {
                "concurrency": n,
                "aggregate_tokens_per_s": point.aggregate_tokens_per_s,
                "decode_tokens_per_s": point.per_stream_tokens_per_s,
            }
        )
    ttft = [
        prefill.prefill_seconds(profile, work, node, prompt_tokens, p.max_num_batched_tokens)
        for node in (fast, slow)
    ]
    return {
        "stack": stack,
        "instance_type": p.instance_type,
        "nodes": p.nodes,
        "prompt_tokens_estimated": prompt_tokens,
        "ttft_s_range": [round(ttft[0], 2), round(ttft[1], 2)],
        "bandwidth_measured": catalog.decode_bandwidth(instance, p.pod_cpu).measured,
        "levels": levels,
        "provenance": dict(throughput.PROVENANCE),
    }


def comparison_lines(report: Mapping[str, Any], predicted: Mapping[str, Any] | None) -> list[str]:
    """Planned beside measured medians, one row per concurrency level."""
    if predicted is None:
        return ["", "plan: the stack does not plan, so there is nothing to compare"]
    lo, hi = predicted["ttft_s_range"]
    lines = [
        "",
        f"plan ({predicted['stack']}: {predicted['nodes']} x {predicted['instance_type']}) "
        "beside measured medians; decode "
        + (
            "calibrated"
            if predicted["bandwidth_measured"]
            else "extrapolated (the low end of the node's bandwidth range)"
        )
        + ", batching and prefill modelled",
        f"{'conc':>4} {'aggregate tok/s plan':>21} {'measured':>9} "
        f"{'tok/s/stream plan':>18} {'measured':>9} {'TTFT s plan':>14} {'measured':>9}",
    ]
    measured = {lvl["concurrency"]: lvl for lvl in report["levels"]}
    for level in predicted["levels"]:
        got = measured.get(level["concurrency"], {})

        def median(name: str, got: Mapping[str, Any] = got) -> str:
            stat = got.get(name)
            return "-" if not stat else f"{stat['median']:.2f}"

        lines.append(
            f"{level['concurrency']:>4} {level['aggregate_tokens_per_s']:>21.2f} "
            f"{median('aggregate_tokens_per_s'):>9} {level['decode_tokens_per_s']:>18.2f} "
            f"{median('decode_tokens_per_s'):>9} {f'{lo:.1f}-{hi:.1f}':>14} "
            f"{median('ttft_s'):>9}"
        )
    return lines
