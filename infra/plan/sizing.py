"""The planner: turns a validated stack config into settings vLLM will start and serve with.

Pure: no Pulumi, no I/O. The CLI (`infra.plan`), the Pulumi program and the tests share it, so
what the plan shows is what gets deployed. Every refusal is a `PlanError` naming the key, the rule
and the fix.

The memory story it encodes (field report, FACTS.md):
- a pod holds its stage's weights plus a runtime overhead that splitting does not divide;
- vLLM's CPU worker refuses a KV budget above `cgroup limit - cgroup usage`, and usage includes the
  container's page cache, so a checkpoint the engine container downloaded itself leaves the guard
  nearly nothing; weights downloaded and read by an init container are charged elsewhere;
- the context that fits follows from vLLM's block accounting (`infra.plan.kv_cache`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from infra.plan import catalog
from infra.plan.catalog import GIB, MIB, InstanceType, ModelProfile
from infra.plan.config import ConfigError, StackConfig
from infra.plan.kv_cache import GroupKv, cdiv, group_kv, rank_layer_counts

#: What the memory guard still sees when the checkpoint's page cache has filled the engine
#: container to its limit: the memory the engine frees after loading, before it sizes the KV
#: cache. Measured on the tightest rank of a 12B deployment (0.58 GiB; the other rank saw 0.97).
PAGE_CACHE_GUARD_FLOOR_GIB = 0.58
#: Share of what the guard sees that `kvCacheBytes: auto` leaves unused, for allocator growth
#: between the guard's reading and the KV allocation.
KV_SAFETY_FRACTION = 0.10
#: Shortest context the planner offers when `maxModelLen` is auto: below this the model is of
#: little use and the stage count should grow instead.
MIN_USEFUL_CONTEXT = 1024
#: Candidates for `maxNumBatchedTokens: auto`, largest (fastest prefill) preferred on a tie, and
#: never above vLLM's default: the runtime overhead was measured there, and activation buffers
#: grow with it.
BATCHED_TOKEN_CHOICES = (512, 1024, 2048, 4096, 8192, 16384)
#: vLLM's CPU defaults per rank of the group (multiplied by the world size).
CPU_DEFAULT_BATCHED_TOKENS_PER_RANK = 2048
CPU_DEFAULT_MAX_SEQS_PER_RANK = 128
#: gloo and vLLM's shared-memory broadcast between the engine's processes live in /dev/shm.
SHM_GIB = 1
#: Startup probe budget never below this (a cold start includes waiting for the peer ranks).
MIN_STARTUP_SECONDS = 30 * 60
#: Room on the node disk beyond image and checkpoint, as a fraction.
DISK_MARGIN = 0.2


class PlanError(ConfigError):
    """A configuration that cannot start or serve, with the key to change and how."""


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
class Plan:
    """Everything derived for a stack; `to_json` gives the documented machine-readable view."""

    stack: str
    model: str
    instance_type: str
    generation: str
    nodes: int
    stages: int
    replicas: int
    node_allocatable_gib: float
    node_cotenants_gib: float
    pod_memory_gib: float
    pod_cpu: int
    ranks: tuple[RankPlan, ...]
    tightest_rank: int
    guard_available_gib: float
    weight_prefetch: bool
    model_cache: str
    kv_cache_bytes: int
    max_num_batched_tokens: int
    max_num_seqs: int
    max_model_len: int
    kv_needed_gib: float
    kv_cache_tokens: int
    max_concurrency: float
    prefill_steps_at_max_len: int
    decode_tokens_per_s: float
    node_disk_gib: int
    model_volume_gib: int
    shm_gib: int
    cold_start_seconds: int
    warm_restart_seconds: int
    startup_timeout_seconds: int
    vllm_image: str
    reasons: tuple[str, ...]

    @property
    def weights_gib_per_stage(self) -> list[float]:
        return [r.weights_gib for r in self.ranks]

    @property
    def overhead_gib_per_pod(self) -> float:
        return max(r.overhead_gib for r in self.ranks)

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["ranks"] = [asdict(r) for r in self.ranks]
        data["reasons"] = list(self.reasons)
        data["weights_gib_per_stage"] = self.weights_gib_per_stage
        data["overhead_gib_per_pod"] = self.overhead_gib_per_pod
        return data


@dataclass(frozen=True)
class _Split:
    """One stage count tried by the planner, with the KV budget and context it gives."""

    stages: int
    ranks: tuple[RankPlan, ...]
    kvs: GroupKv
    tight: RankPlan
    kv_bytes: int
    batched: int
    length: int


@dataclass(frozen=True)
class _NodeBudget:
    instance: InstanceType
    allocatable_gib: float
    cotenants_gib: float
    free_gib: float
    cpu: int


def _gib(value: float) -> float:
    return round(value, 2)


def _instance(cfg: StackConfig) -> InstanceType:
    name = cfg.instance_type
    if name in catalog.INSTANCE_TYPES:
        return catalog.INSTANCE_TYPES[name]
    if not catalog.is_graviton_name(name):
        raise PlanError(
            "instanceType",
            f"{name} is not a Graviton (arm64) type, and the image and node group are arm64",
            "choose a Graviton type such as m7g.2xlarge or m8g.4xlarge",
        )
    families = sorted({n.split(".")[0] for n in catalog.INSTANCE_TYPES})
    raise PlanError(
        "instanceType",
        f"{name} is not in the catalogue (families {', '.join(families)}, large to 8xlarge)",
        "choose one of those, such as m7g.2xlarge",
    )


def _node_budget(instance: InstanceType, volumes: bool) -> _NodeBudget:
    """What one model pod may take on the busiest node (every replica of a cluster add-on there)."""
    cotenants = [c for c in catalog.COTENANTS if volumes or not c.with_volumes_only]
    per_node = [(c, c.replicas if c.kind == "deployment" else 1) for c in cotenants]
    cotenant_mib = sum(c.memory_mib * n for c, n in per_node)
    cotenant_mcpu = sum(c.millicpu * n for c, n in per_node)
    allocatable = catalog.allocatable_mib(instance) / 1024
    free = allocatable - cotenant_mib / 1024 - catalog.NODE_HEADROOM_MIB / 1024
    cpu = (catalog.allocatable_millicpu(instance) - cotenant_mcpu) // 1000
    return _NodeBudget(instance, allocatable, cotenant_mib / 1024, free, cpu)


def _stage_weights_gib(profile: ModelProfile, stages: int, rank: int, layers: int) -> float:
    weights = layers * profile.layer_bytes
    if rank == 0:
        weights += profile.embedding_bytes + profile.non_text_bytes
    if rank == stages - 1 and (stages > 1 or not profile.tied_embeddings):
        weights += profile.embedding_bytes  # the output head (a copy, when tied)
    return weights / GIB


def _rank_plans(
    profile: ModelProfile, stages: int, pod_gib: float, prefetch: bool
) -> tuple[tuple[RankPlan, ...], GroupKv]:
    plans = []
    for rank in range(stages):
        sliding, full = rank_layer_counts(profile, stages, rank)
        layers = sliding + full
        weights = _stage_weights_gib(profile, stages, rank, layers)
        overhead = profile.overhead_base_gib + profile.overhead_per_weight_gib * weights
        free = pod_gib - weights - overhead
        if prefetch:
            guard = free
        else:
            # The engine downloads and reads the whole checkpoint itself: its page cache fills
            # the container up to the limit, and the guard sees only what loading left behind.
            left = free - profile.checkpoint_bytes / GIB
            guard = min(free, max(left, PAGE_CACHE_GUARD_FLOOR_GIB))
        plans.append(
            RankPlan(
                rank,
                layers,
                sliding,
                full,
                _gib(weights),
                _gib(overhead),
                free,
                guard,
            )
        )
    return tuple(plans), group_kv(profile, stages)


def _auto_kv_bytes(guard_gib: float) -> int:
    usable = guard_gib * (1 - KV_SAFETY_FRACTION)
    return max(0, math.floor(usable * GIB / MIB)) * MIB


def _max_len(kvs: GroupKv, kv_bytes: int, batched: int, upper: int) -> int:
    return kvs.max_len(kv_bytes, batched, upper)


def _choose_batched(
    cfg: StackConfig, kvs: GroupKv, kv_bytes: int, upper: int, stages: int
) -> tuple[int, int]:
    """Pick `maxNumBatchedTokens` and the longest length it allows (capped at `upper`)."""
    if cfg.max_num_batched_tokens != "auto":
        batched = cfg.max_num_batched_tokens
        return batched, _max_len(kvs, kv_bytes, batched, upper)
    floor = CPU_DEFAULT_MAX_SEQS_PER_RANK * stages
    ceiling = CPU_DEFAULT_BATCHED_TOKENS_PER_RANK * stages
    usable = [b for b in BATCHED_TOKEN_CHOICES if floor <= b <= ceiling] or [ceiling]
    best = (usable[0], _max_len(kvs, kv_bytes, usable[0], upper))
    for batched in usable[1:]:
        length = _max_len(kvs, kv_bytes, batched, upper)
        if length >= best[1]:
            best = (batched, length)
    return best


def _stage_candidates(cfg: StackConfig, profile: ModelProfile) -> list[int]:
    if cfg.pipeline_stages != "auto":
        if cfg.pipeline_stages > profile.layers:
            raise PlanError(
                "pipelineStages",
                f"{cfg.pipeline_stages} is more than the model's {profile.layers} layers",
                f"use at most {profile.layers}, or auto",
            )
        return [cfg.pipeline_stages]
    return list(range(1, min(8, profile.layers) + 1))


def _pod_memory(cfg: StackConfig, budget: _NodeBudget) -> float:
    if cfg.pod_memory_gib == "auto":
        pod = math.floor(budget.free_gib)
        if pod <= 0:
            raise PlanError(
                "instanceType",
                f"{budget.instance.name} leaves no memory for a model pod after its other tenants",
                "choose a larger type such as m7g.2xlarge",
            )
        return float(pod)
    if cfg.pod_memory_gib > budget.free_gib:
        raise PlanError(
            "podMemoryGiB",
            f"{cfg.pod_memory_gib:g} GiB is more than the {budget.free_gib:.1f} GiB a "
            f"{budget.instance.name} node can give after its other tenants",
            f"set it to at most {math.floor(budget.free_gib)} or auto, or choose a larger "
            "`instanceType`",
        )
    return float(cfg.pod_memory_gib)


def plan(cfg: StackConfig, stack: str = "dev") -> Plan:
    """Plan a stack, or raise `PlanError` saying why it cannot start and what to change."""
    instance = _instance(cfg)
    profile = cfg.profile()
    budget = _node_budget(instance, cfg.model_cache == "volume")
    if budget.cpu < 1:
        raise PlanError(
            "instanceType",
            f"{instance.name} leaves no whole CPU for a model pod after its other tenants",
            "choose a type with at least 4 vCPU, such as m7g.xlarge",
        )
    pod_gib = _pod_memory(cfg, budget)
    min_len = MIN_USEFUL_CONTEXT if cfg.max_model_len == "auto" else cfg.max_model_len
    if cfg.max_model_len != "auto" and cfg.max_model_len > profile.max_context:
        raise PlanError(
            "maxModelLen",
            f"{cfg.max_model_len} is above {profile.name}'s context of {profile.max_context}",
            f"use at most {profile.max_context}, or auto",
        )
    upper = (
        min(profile.max_context, cfg.max_context_cap)
        if cfg.max_model_len == "auto"
        else cfg.max_model_len
    )

    # Fewest stages that serve the target context; when none does, the split that serves the
    # longest. A model that fits one node is never split just because it could be.
    chosen = holding = None
    rejected: list[str] = []
    auto_stages = cfg.pipeline_stages == "auto"
    for stages in _stage_candidates(cfg, profile):
        ranks, kvs = _rank_plans(profile, stages, pod_gib, cfg.weight_prefetch)
        tight = min(ranks, key=lambda r: r.guard_gib)
        if tight.free_gib <= 0 and auto_stages:
            need = tight.weights_gib + tight.overhead_gib
            rejected.append(f"{stages} stage(s) need {need:.1f} GiB per pod before any KV cache")
            continue
        kv_bytes = (
            _auto_kv_bytes(tight.guard_gib) if cfg.kv_cache_bytes == "auto" else cfg.kv_cache_bytes
        )
        batched, length = _choose_batched(cfg, kvs, kv_bytes, upper, stages)
        candidate = _Split(stages, ranks, kvs, tight, kv_bytes, batched, length)
        holding = holding or candidate
        if auto_stages and (length < min_len or kv_bytes > tight.guard_gib * GIB):
            rejected.append(f"{stages} stage(s) leave KV for only {length} tokens")
            continue
        if chosen is None or length > chosen.length:
            chosen = candidate
        if length >= upper:
            break

    explicit = cfg.kv_cache_bytes != "auto" or cfg.max_model_len != "auto"
    if chosen is None and holding is not None and explicit:
        chosen = holding  # the split that holds the weights; the explicit key gets the blame
    if chosen is None:
        raise PlanError(
            "instanceType",
            f"{instance.name} ({pod_gib:g} GiB per pod) cannot hold {profile.name} at any "
            f"split ({rejected[0]}; {rejected[-1]})",
            "choose a larger type such as m7g.4xlarge",
        )
    result = _finish(cfg, stack, instance, profile, budget, pod_gib, chosen, min_len, upper)
    if cfg.weight_prefetch:
        result = replace(result, reasons=(*result.reasons, _without_prefetch(cfg, stack)))
    return result


def _without_prefetch(cfg: StackConfig, stack: str) -> str:
    """What the same stack would get if vLLM downloaded the weights itself, as in the report."""
    try:
        other = plan(cfg.model_copy(update={"weight_prefetch": False}), stack)
    except PlanError as error:
        return f"without the weight prefetch this stack would not start: {error}"
    return (
        f"without the weight prefetch the guard would see {other.guard_available_gib:.2f} GiB "
        "(the checkpoint's page cache charged to the engine container), leaving "
        f"{other.max_model_len:,} tokens at {other.max_concurrency:.2f}x"
    )


def _finish(
    cfg: StackConfig,
    stack: str,
    instance: InstanceType,
    profile: ModelProfile,
    budget: _NodeBudget,
    pod_gib: float,
    chosen: _Split,
    min_len: int,
    upper: int,
) -> Plan:
    stages, ranks, kvs, tight = chosen.stages, chosen.ranks, chosen.kvs, chosen.tight
    kv_bytes, batched, length = chosen.kv_bytes, chosen.batched, chosen.length
    guard = tight.guard_gib
    why_guard = (
        "the init container's page cache is charged outside the engine container"
        if cfg.weight_prefetch
        else "the checkpoint's page cache is charged to the engine container"
    )
    if tight.free_gib <= 0:
        need = tight.weights_gib + tight.overhead_gib
        raise PlanError(
            "pipelineStages",
            f"{stages} stage(s) put {need:.1f} GiB of weights and runtime on rank "
            f"{tight.rank}, more than its {pod_gib:g} GiB pod",
            "use more stages or auto, or choose a larger `instanceType`",
        )
    if kv_bytes > guard * GIB:
        raise PlanError(
            "kvCacheBytes",
            f"{kv_bytes} ({kv_bytes / GIB:.2f} GiB) is more than vLLM's memory guard will see "
            f"on rank {tight.rank} ({guard:.2f} GiB: {why_guard})",
            f"set it to at most {_auto_kv_bytes(guard)} or auto"
            + ("" if cfg.weight_prefetch else ", or set `weightPrefetch: true`"),
        )
    if length == 0 or (cfg.max_model_len != "auto" and length < cfg.max_model_len):
        want = upper if cfg.max_model_len != "auto" else min_len
        needed = kvs.bytes_per_request(want, batched)
        fits = _max_len(kvs, kv_bytes, batched, profile.max_context)
        raise PlanError(
            "maxModelLen",
            f"{want} tokens need {needed / GIB:.2f} GiB of KV cache per rank, more than the "
            f"{kvs.usable_bytes(kv_bytes) / GIB:.2f} GiB available to it (vLLM would estimate "
            f"a maximum of {fits})",
            f"set it to at most {fits} or auto, or give the KV cache more memory",
        )
    if batched < CPU_DEFAULT_MAX_SEQS_PER_RANK * stages:
        raise PlanError(
            "maxNumBatchedTokens",
            f"{batched} is below vLLM's max_num_seqs of {CPU_DEFAULT_MAX_SEQS_PER_RANK * stages}",
            f"use at least {CPU_DEFAULT_MAX_SEQS_PER_RANK * stages}, or auto",
        )
    max_len = length if cfg.max_model_len == "auto" else cfg.max_model_len
    concurrency = kvs.concurrency(kv_bytes, max_len, batched)
    tokens = int(concurrency * max_len)

    decode_seconds = 0.0
    for rank in ranks:
        read = rank.layers * profile.layer_bytes
        if rank.rank == stages - 1:
            read += profile.embedding_bytes  # the output head is read for every token
        decode_seconds += read / (instance.decode_gbps_per_vcpu * 1e9 * budget.cpu)
    decode = 1 / decode_seconds

    checkpoint_gib = profile.checkpoint_bytes / GIB
    volume_gib = math.ceil(checkpoint_gib * (1 + DISK_MARGIN))
    on_node = catalog.NODE_OS_DISK_GIB + catalog.IMAGE_DISK_GIB
    if cfg.model_cache == "none":
        on_node += checkpoint_gib
    disk = int(10 * math.ceil(on_node * (1 + DISK_MARGIN) / 10))
    download = profile.checkpoint_bytes / (cfg.download_mbps * 1e6)
    load = max(r.weights_gib for r in ranks) * catalog.LOAD_SECONDS_PER_GIB
    warm = load + catalog.WARMUP_SECONDS
    cold = download + warm
    restart = warm if cfg.model_cache == "volume" else cold
    startup = max(MIN_STARTUP_SECONDS, math.ceil(2 * cold / 60) * 60)

    reasons = [
        f"pod memory {pod_gib:g} GiB: {budget.allocatable_gib:.1f} GiB allocatable on "
        f"{instance.name} minus {budget.cotenants_gib:.2f} GiB requested by the add-ons and "
        f"LWS controller that may share the node minus {catalog.NODE_HEADROOM_MIB / 1024:g} GiB "
        "headroom; requests equal limits",
        f"{stages} stage(s): the fewest whose heaviest rank holds weights "
        f"({tight.weights_gib:.1f} GiB) plus runtime overhead ({tight.overhead_gib:.1f} GiB, "
        f"paid by every pod) and leaves KV for the longest context; {stages * cfg.replicas} "
        "node(s) in all"
        if cfg.pipeline_stages == "auto"
        else f"{stages} stage(s), as the stack sets",
        f"memory guard sees {guard:.2f} GiB on rank {tight.rank}: {why_guard}",
        f"KV cache {kv_bytes / GIB:.2f} GiB per rank: "
        + (
            f"{100 * (1 - KV_SAFETY_FRACTION):.0f}% of what the guard sees"
            if cfg.kv_cache_bytes == "auto"
            else "as the stack sets"
        ),
        f"max_num_batched_tokens {batched}: "
        + (
            "the largest that still serves the longest context (sliding-window layers "
            "reserve window - 1 + stages x batched tokens); a "
            f"{max_len}-token prompt is prefilled in {cdiv(max_len, batched)} step(s)"
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
        f"decode ~{decode:.1f} tokens/s per stream: each token streams the stages' weights in "
        f"series at ~{instance.decode_gbps_per_vcpu * budget.cpu:.0f} GB/s per node",
    ]
    return Plan(
        stack=stack,
        model=profile.name,
        instance_type=instance.name,
        generation=instance.generation,
        nodes=stages * cfg.replicas,
        stages=stages,
        replicas=cfg.replicas,
        node_allocatable_gib=_gib(budget.allocatable_gib),
        node_cotenants_gib=_gib(budget.cotenants_gib),
        pod_memory_gib=pod_gib,
        pod_cpu=budget.cpu,
        ranks=tuple(
            replace(r, free_gib=_gib(r.free_gib), guard_gib=_gib(r.guard_gib)) for r in ranks
        ),
        tightest_rank=tight.rank,
        guard_available_gib=_gib(guard),
        weight_prefetch=cfg.weight_prefetch,
        model_cache=cfg.model_cache,
        kv_cache_bytes=kv_bytes,
        max_num_batched_tokens=batched,
        max_num_seqs=CPU_DEFAULT_MAX_SEQS_PER_RANK * stages,
        max_model_len=max_len,
        kv_needed_gib=_gib(kvs.bytes_per_request(max_len, batched) / GIB),
        kv_cache_tokens=tokens,
        max_concurrency=round(concurrency, 2),
        prefill_steps_at_max_len=cdiv(max_len, batched),
        decode_tokens_per_s=round(decode, 2),
        node_disk_gib=disk,
        model_volume_gib=volume_gib,
        shm_gib=SHM_GIB,
        cold_start_seconds=int(cold),
        warm_restart_seconds=int(restart),
        startup_timeout_seconds=startup,
        vllm_image=cfg.vllm_image,
        reasons=tuple(reasons),
    )
