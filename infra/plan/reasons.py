"""The plan's reasons: why each number the planner chose is what it is, as the plan prints them
(`Plan.reasons`, one line a decision). Text only; the arithmetic is `infra.plan.sizing`'s and
`infra.plan.budget`'s."""

from __future__ import annotations

from typing import Protocol

from infra.plan import catalog, liveness
from infra.plan.budget import (
    BATCHED_TOKEN_CHOICES,
    CPU_DEFAULT_MAX_SEQS_PER_RANK,
    KV_SAFETY_FRACTION,
    NodeBudget,
    RankPlan,
)
from infra.plan.catalog import GIB, InstanceType
from infra.plan.config import StackConfig
from infra.plan.kv_cache import cdiv
from infra.plan.liveness import Liveness


class Chosen(Protocol):
    """The split the planner chose (`sizing._Split`): what its reasons name."""

    stages: int
    tight: RankPlan
    kv_bytes: int
    batched: int


def why_guard(cfg: StackConfig) -> str:
    return (
        "the init container's page cache is charged outside the engine container"
        if cfg.weight_prefetch
        else "the checkpoint's page cache is charged to the engine container"
    )


def plan_reasons(
    cfg: StackConfig,
    instance: InstanceType,
    budget: NodeBudget,
    pod_gib: float,
    chosen: Chosen,
    max_len: int,
    upper: int,
    concurrency: float,
    decode: float,
    live: Liveness,
    model: liveness.Prefill,
) -> tuple[str, ...]:
    """Why each number is what it is, one line a decision, in the order the plan shows them."""
    stages, tight, kv_bytes, batched = chosen.stages, chosen.tight, chosen.kv_bytes, chosen.batched
    return (
        f"pod memory {pod_gib:g} GiB: {budget.allocatable_gib:.1f} GiB allocatable on "
        f"{instance.name} less {budget.cotenants_gib:.2f} GiB for the pods that may share the "
        f"node and {catalog.NODE_HEADROOM_MIB / 1024:g} GiB headroom; requests = limits",
        f"{stages} stage(s): the fewest whose heaviest rank holds its weights "
        f"({tight.weights_gib:.1f} GiB), the runtime every pod pays ({tight.overhead_gib:.1f} "
        "GiB) and KV for the longest context"
        if cfg.pipeline_stages == "auto"
        else f"{stages} stage(s), as the stack sets",
        f"memory guard sees {tight.guard_gib:.2f} GiB on rank {tight.rank}: {why_guard(cfg)}",
        f"KV cache {kv_bytes / GIB:.2f} GiB per rank: "
        + (
            f"{100 * (1 - KV_SAFETY_FRACTION):.0f}% of what the guard sees"
            if cfg.kv_cache_bytes == "auto"
            else "as the stack sets"
        ),
        f"max_num_batched_tokens {batched}: "
        + (
            "the largest that keeps the longest context (sliding layers reserve window - 1 + "
            "stages x batched) and a step short enough to tell busy from stalled, else the "
            f"least; {cdiv(max_len, batched)} step(s) prefill {max_len:,} tokens"
            if cfg.max_num_batched_tokens == "auto"
            else "as the stack sets"
        ),
        f"max_model_len {max_len}: "
        + (
            f"the longest one request fits, capped at {upper} (`maxContextCap`)"
            if cfg.max_model_len == "auto"
            else "as the stack sets"
        )
        + f"; {concurrency:.2f} such requests fit at once",
        _why_decode(cfg, instance, budget, decode),
        why_liveness(live, model, max_len, CPU_DEFAULT_MAX_SEQS_PER_RANK * stages),
    )


def _why_decode(cfg: StackConfig, instance: InstanceType, budget: NodeBudget, decode: float) -> str:
    band = catalog.decode_bandwidth(instance, budget.cpu)
    bandwidth = f"~{band.low:.0f} GB/s per node, " + (
        f"set by {band.basis}" if band.measured else f"the low end of a range, {band.basis}"
    )
    profile = cfg.profile()
    if profile.is_moe:
        from infra.plan import moe  # the MoE layer, for a mixture-of-experts model only

        return (
            f"decode ~{decode:.1f} tokens/s per stream: {moe.decode_source(profile)}; the "
            f"{profile.decode_reference} layers' bytes stream at {bandwidth}; never above "
            "the bytes a token of its routed experts reads at that bandwidth"
        )
    return (
        f"decode ~{decode:.1f} tokens/s per stream: each token streams the stages' weights in "
        f"series at {bandwidth}"
    )


def why_liveness(live: Liveness, model: liveness.Prefill, max_len: int, least: int) -> str:
    """The liveness reason; beyond the budget, how slow detection is and what shortens it."""
    budget, probes = liveness.DETECTION_BUDGET_S, live.probes
    # Below the automatic choices too: down to vLLM's floor of one token per sequence.
    choices = sorted({least, *(b for b in BATCHED_TOKEN_CHOICES if b >= least)})
    fits = liveness.max_batched_tokens(model, max_len, choices)
    fits_live = liveness.liveness(model, fits, max_len)
    fast = live.fast_half_detection_s
    if fast <= budget:
        noticed = (
            f"a broken group is noticed within {fast} s at the fast half of the range, "
            f"{live.detection_s} s at its slow end"
        )
    elif fits_live.fast_half_detection_s <= budget:
        noticed = (
            f"a broken group is noticed only after {fast} s at the fast half of the range, "
            f"beyond the {budget} s budget; `maxNumBatchedTokens` {fits} shortens it to "
            f"{fits_live.fast_half_detection_s} s"
        )
    else:
        noticed = (
            f"a broken group is noticed only after {fast} s at the fast half of the range, "
            f"beyond the {budget} s budget; even `maxNumBatchedTokens` {fits} (the least for "
            f"{least} sequences) takes {fits_live.fast_half_detection_s} s: a shorter "
            "`maxModelLen` or a type with more cores shortens it"
        )
    return (
        f"liveness every {probes.period_s} s, {probes.failures} failures: before it takes traffic "
        f"the leader measures its own step ({liveness.CALIBRATION_RUNS} one-token requests of "
        f"{probes.calibrate_tokens} prompt tokens, the first a warm-up, the slowest of the rest "
        f"kept), and calls a busy engine that emits nothing for that step x {probes.growth:.2f} "
        f"(the last chunk of a {max_len:,}-token prompt over the first, modelled) x "
        f"{probes.margin:g} stuck, at least {liveness.MIN_STALL_S} s and at most "
        f"{probes.stall_s} s: "
        f"the longest step at the slow end of the {probes.path} prefill range "
        f"({live.step_s:.1f} s) x {probes.in_flight} batch(es) in flight, also the engine's step "
        f"timeout, which vLLM reads once at start; {noticed}; the longest prompt's first token "
        f"comes within {live.first_byte_s} s (`firstByteTimeoutSeconds`, part of the reply "
        f"timeout); idle, one generated token proves the pipeline at most every "
        f"{probes.idle_check_s} s ({86400 // probes.idle_check_s:,} requests a day, counted by "
        f"vLLM's metrics as traffic), so a pipeline broken while idle is noticed within "
        f"{live.idle_detection_s} s at the fast half of the range (a proof with no answer fails "
        "only after the stall bound: vLLM's counts show a request in its first step as idle)"
    )
