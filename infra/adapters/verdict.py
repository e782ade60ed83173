"""The verdict a plan opens with: at most eight lines a person reads in ten seconds.

Whether the stack starts and on what; the context it serves to how many requests at once; decode
tokens/s for one stream and in all; time to first token for a short prompt and the longest; what
it costs per month and per million output tokens; the one change worth making first, if any; and
how many warnings follow the table. `python -m infra.plan --brief` prints it alone; `--json`
carries it as `verdict`.

Pure: every figure is the plan's or its economics', formatted, never recomputed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

from components.manifests import images
from infra.plan import catalog, support
from infra.plan.config import StackConfig
from infra.plan.economics import Economics
from infra.plan.sizing import Plan
from infra.plan.throughput import SHORT_PROMPT_TOKENS, Served
from infra.plan.weights import QUALITY_UNMEASURED

if TYPE_CHECKING:
    from infra.plan.elastic import ElasticPlan

#: The verdict never grows past this many lines.
MAX_LINES = 8
#: KleidiAI in the image's torch is not verified: on this project's x86 build,
#: `_dyn_quant_matmul_4bit` ran a scalar fallback near 2 GFLOP/s with no warning (FACTS.md).
INT4_KERNEL_WARNING = (
    "`weights` int4: vLLM's Dynamic4bitLinearKernel is fast only if the image's torch carries "
    "KleidiAI (unverified for the arm64 image); without it the same kernel runs a scalar "
    "fallback near 2 GFLOP/s (seen on x86) and every prefill figure here is far too fast"
)


def verdict_lines(
    p: Plan,
    e: Economics,
    advice: str | None,
    warnings: Sequence[str],
    scaled: ElasticPlan | None = None,
    long_wait: str | None = None,
) -> list[str]:
    """The verdict, one line per question. An elastic stack (`scaled`) states the month its
    schedule costs, system nodes included, with the fewest and the most groups beside it; bounds
    that wait longer than is practical (`long_wait`, also among the warnings) get a line."""
    s = e.served
    streams = s.planned.sequences * p.replicas
    full = s.planned.aggregate_tokens_per_s * p.replicas
    lines = [
        f"{p.stack} starts: {p.nodes} x {p.instance_type}, {_count(p.replicas, 'group')} of "
        f"{_count(p.stages, 'pipeline stage')}, serving {p.model}"
        + ("" if p.weights == "bf16" else f" in {p.weights} (quality {QUALITY_UNMEASURED})"),
        f"context: {p.max_model_len:,} tokens x {p.max_concurrency:.2f} requests at once",
        f"decode: {s.one.aggregate_tokens_per_s:.2f} tokens/s for one stream "
        + _one_stream_label(p, s)
        + (
            f", {full:.2f} in all at {streams} streams, {s.planned.per_stream_tokens_per_s:.2f} "
            "each (modelled)"
            if streams > 1
            else ", one stream at a time"
        ),
        "first token: "
        + (
            f"~{s.ttft_1k_s:.0f} s for {SHORT_PROMPT_TOKENS:,} prompt tokens, "
            if p.max_model_len > SHORT_PROMPT_TOKENS
            else ""
        )
        + f"~{s.ttft_max_len_s:.0f} s for {p.max_model_len:,} ({s.prefill_source})",
        _cost_line(e, scaled),
    ]
    if advice:
        lines.append(advice)
    if long_wait:
        lines.append(f"warning: {long_wait}")
    lines.append(f"warnings: {len(warnings)}, listed at the end" if warnings else "warnings: none")
    return lines


def _is_moe(model: str) -> bool:
    """A catalogue mixture of experts, whose decode comes from a measured ratio."""
    known = catalog.MODELS.get(model)
    return known is not None and known.is_moe


def _count(n: int, noun: str) -> str:
    return f"one {noun}" if n == 1 else f"{n} {noun}s"


def _groups(n: int) -> str:
    return "no groups" if n == 0 else _count(n, "group")


def _cost_line(e: Economics, scaled: ElasticPlan | None = None) -> str:
    c = e.costs
    if c.usd_per_month is None or e.usd_per_million_full is None:
        return "cost: " + "; ".join(c.missing)
    tokens = (
        f"${e.usd_per_million_full:.2f} per million output tokens at full load, "
        f"${e.usd_per_million_one:.2f} with one stream"
    )
    if scaled is not None and None not in (scaled.usd_month_fewest, scaled.usd_month_most):
        groups = (scaled.scaling.min_groups, scaled.scaling.max_groups)
        span = (
            f"${scaled.usd_month_fewest:,.2f} with {_groups(groups[0])} all month, "
            f"${scaled.usd_month_most:,.2f} with {_groups(groups[1])}"
        )
        if scaled.usd_month_schedule is not None:
            return (
                f"cost: ${scaled.usd_month_schedule:,.2f}/month on its schedule, system nodes "
                f"included ({span}); {tokens}"
            )
        return f"cost: {span}, system nodes included; {tokens}"
    return f"cost: ${c.usd_per_month:,.2f}/month; {tokens}"


def plan_warnings(cfg: StackConfig, e: Economics, changed: str | None, today: dt.date) -> list[str]:
    """Everything to act on or to discount, in the one place the plan lists it: a what-if that
    changes the nodes or cost, the support and security warnings the program logs too, and the
    cost model's caveats."""
    found = [changed] if changed else []
    if cfg.vllm_image_own_build:
        found.append(
            f"`vllmImage` {cfg.vllm_image} is your own build (`vllmImageOwnBuild`): the plan "
            "does not check that it is vLLM for CPUs on arm64, and its rates are the pinned "
            f"{images.PINS['vllm'].tagged}'s"
        )
    if cfg.weights == "int4":
        found.append(INT4_KERNEL_WARNING)
    return [*found, *support.warnings(cfg, today), *e.costs.notes]


def verdict_json(
    p: Plan,
    e: Economics,
    advice: str | None,
    warnings: Sequence[str],
    scaled: ElasticPlan | None = None,
    long_wait: str | None = None,
) -> dict[str, object]:
    """The verdict as data: its lines, and the figures a script would test."""
    return {
        "starts": True,
        "lines": verdict_lines(p, e, advice, warnings, scaled, long_wait),
        "advice": advice,
        "warnings": len(warnings),
    }


def _one_stream_label(p: Plan, s: Served) -> str:
    """How the one-stream rate is known: calibrated only on the type measured; elsewhere the low
    end of an extrapolated range, with its high end and the run that would settle it."""
    if _is_moe(p.model):
        kind = "derived from a measured MoE/dense ratio"
    else:
        kind = "calibrated" if p.weights == "bf16" else "modelled"
    if s.bandwidth_measured:
        return f"({kind})"
    kind = "extrapolated" if kind == "calibrated" else f"{kind}, extrapolated"
    return (
        f"({kind}: the low end, up to {s.one_stream_high_tokens_per_s:.2f}; one "
        f"{catalog.DECODE_MEASUREMENT} on {p.instance_type} settles it)"
    )
