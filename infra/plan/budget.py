"""The memory budget of one pod: what a node leaves it, what each pipeline rank's weights and
runtime take, and the KV cache bytes and batch size that fit in the rest.

Pure arithmetic over the catalogue and vLLM's block accounting (`infra.plan.kv_cache`); the
planner (`infra.plan.sizing`) chooses among the splits and owns every refusal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.plan import catalog
from infra.plan.catalog import GIB, MIB, InstanceType, ModelProfile
from infra.plan.config import StackConfig
from infra.plan.kv_cache import GroupKv, group_kv, rank_layer_counts

#: What the memory guard still sees when the checkpoint's page cache has filled the engine
#: container to its limit: the memory the engine frees after loading, before it sizes the KV
#: cache. Measured on the tightest rank of a 12B deployment (0.58 GiB; the other rank saw 0.97).
PAGE_CACHE_GUARD_FLOOR_GIB = 0.58
#: Share of what the guard sees that `kvCacheBytes: auto` leaves unused, for allocator growth
#: between the guard's reading and the KV allocation.
KV_SAFETY_FRACTION = 0.10
#: Candidates for `maxNumBatchedTokens: auto`, largest (fastest prefill) preferred on a tie, and
#: never above vLLM's default: the runtime overhead was measured there, and activation buffers
#: grow with it.
BATCHED_TOKEN_CHOICES = (512, 1024, 2048, 4096, 8192, 16384)
#: vLLM's CPU defaults per rank of the group (multiplied by the world size).
CPU_DEFAULT_BATCHED_TOKENS_PER_RANK = 2048
CPU_DEFAULT_MAX_SEQS_PER_RANK = 128


@dataclass(frozen=True)
class RankPlan:
    """Memory of one pipeline rank (one pod)."""

    rank: int
    layers: int
    sliding_layers: int
    full_layers: int
    weights_gib: float
    overhead_gib: float
    #: Pod memory left for the KV cache once weights and overhead are resident.
    free_gib: float
    #: What vLLM's memory guard will report as available when it sizes the KV cache.
    guard_gib: float


@dataclass(frozen=True)
class NodeBudget:
    """What one model pod may take on a node, and what the node's other tenants request."""

    instance: InstanceType
    allocatable_gib: float
    cotenants_gib: float
    free_gib: float
    cpu: int


def round_gib(value: float) -> float:
    return round(value, 2)


def node_budget(instance: InstanceType, volumes: bool, gatekeeper: bool = True) -> NodeBudget:
    """What one model pod may take on the busiest node (every replica of a cluster add-on there).
    Without a gatekeeper (`frontDoor: vllm-key`) its sidecar is not counted."""
    cotenants = [
        c
        for c in catalog.COTENANTS
        if (volumes or not c.with_volumes_only) and (gatekeeper or c.kind != "sidecar")
    ]
    per_node = [(c, c.replicas if c.kind == "deployment" else 1) for c in cotenants]
    cotenant_mib = sum(c.memory_mib * n for c, n in per_node)
    cotenant_mcpu = sum(c.millicpu * n for c, n in per_node)
    allocatable = catalog.allocatable_mib(instance) / 1024
    free = allocatable - cotenant_mib / 1024 - catalog.NODE_HEADROOM_MIB / 1024
    cpu = (catalog.allocatable_millicpu(instance) - cotenant_mcpu) // 1000
    return NodeBudget(instance, allocatable, cotenant_mib / 1024, free, cpu)


def stage_weights_gib(profile: ModelProfile, stages: int, rank: int, layers: int) -> float:
    weights = layers * profile.layer_bytes
    if rank == 0:
        weights += profile.embedding_bytes + profile.non_text_bytes
    if rank == stages - 1 and (stages > 1 or not profile.tied_embeddings):
        weights += profile.embedding_bytes  # the output head (a copy, when tied)
    return weights / GIB


def rank_plans(
    profile: ModelProfile, stages: int, pod_gib: float, prefetch: bool
) -> tuple[tuple[RankPlan, ...], GroupKv]:
    plans = []
    for rank in range(stages):
        sliding, full = rank_layer_counts(profile, stages, rank)
        layers = sliding + full
        weights = stage_weights_gib(profile, stages, rank, layers)
        overhead = profile.overhead_base_gib + profile.overhead_per_weight_gib * weights
        free = pod_gib - weights - overhead
        if prefetch:
            guard = free
        else:
            # The engine downloads and reads the whole checkpoint itself: its page cache fills
            # the container up to the limit, and the guard sees only what loading left behind.
            left = free - profile.download_bytes / GIB
            guard = min(free, max(left, PAGE_CACHE_GUARD_FLOOR_GIB))
        plans.append(
            RankPlan(
                rank,
                layers,
                sliding,
                full,
                round_gib(weights),
                round_gib(overhead),
                free,
                guard,
            )
        )
    return tuple(plans), group_kv(profile, stages)


def auto_kv_bytes(guard_gib: float) -> int:
    usable = guard_gib * (1 - KV_SAFETY_FRACTION)
    return max(0, math.floor(usable * GIB / MIB)) * MIB


def longest_context(kvs: GroupKv, kv_bytes: int, batched: int, upper: int) -> int:
    return kvs.max_len(kv_bytes, batched, upper)


def choose_batched(
    cfg: StackConfig,
    kvs: GroupKv,
    kv_bytes: int,
    upper: int,
    stages: int,
    step_cap: int | None = None,
) -> tuple[int, int]:
    """Pick `maxNumBatchedTokens` and the longest length it allows (capped at `upper`).

    `step_cap` is the largest batch whose step a liveness probe can tell from a stall
    (`infra.plan.liveness.max_batched_tokens`); auto never goes above it.
    """
    if cfg.max_num_batched_tokens != "auto":
        batched = cfg.max_num_batched_tokens
        return batched, longest_context(kvs, kv_bytes, batched, upper)
    floor = CPU_DEFAULT_MAX_SEQS_PER_RANK * stages
    ceiling = CPU_DEFAULT_BATCHED_TOKENS_PER_RANK * stages
    if step_cap is not None:
        ceiling = max(floor, min(ceiling, step_cap))
    usable = [b for b in BATCHED_TOKEN_CHOICES if floor <= b <= ceiling] or [ceiling]
    best = (usable[0], longest_context(kvs, kv_bytes, usable[0], upper))
    for batched in usable[1:]:
        length = longest_context(kvs, kv_bytes, batched, upper)
        if length >= best[1]:
            best = (batched, length)
    return best
