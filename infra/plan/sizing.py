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

The per-pod arithmetic (node room, rank weights, guard, KV bytes, batch size) lives in
`infra.plan.budget`; this module chooses the split and refuses what cannot work, and
`infra.plan.reasons` says why.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from components.manifests.drain import DrainSpec
from components.manifests.spec import EndpointLimits
from infra.plan import catalog, liveness, prefill, rollout
from infra.plan.budget import (
    BATCHED_TOKEN_CHOICES,
    CPU_DEFAULT_MAX_SEQS_PER_RANK,
    NodeBudget,
    RankPlan,
    auto_kv_bytes,
    choose_batched,
    longest_context,
    node_budget,
    rank_plans,
    round_gib,
)
from infra.plan.catalog import GIB, InstanceType, ModelProfile
from infra.plan.config import ConfigError, StackConfig
from infra.plan.kv_cache import GroupKv, cdiv
from infra.plan.liveness import Liveness
from infra.plan.reasons import plan_reasons, why_guard
from infra.plan.rollout import RolloutPlan
from infra.plan.vllm_key import plan_endpoint

if TYPE_CHECKING:
    from components.manifests.gatekeeper_conf import GatekeeperLimits
    from components.manifests.quantize import QuantizeSpec

#: Shortest context the planner offers when `maxModelLen` is auto: below this the model is of
#: little use and the stage count should grow instead.
MIN_USEFUL_CONTEXT = 1024
#: gloo and vLLM's shared-memory broadcast between the engine's processes live in /dev/shm.
SHM_GIB = 1
#: Startup probe budget never below this (a cold start includes waiting for the peer ranks).
MIN_STARTUP_SECONDS = 30 * 60
#: Room on the node disk beyond image and checkpoint, as a fraction.
DISK_MARGIN = 0.2
#: `podMemoryGiB: auto` is what the node gives, down to a sixteenth of a GiB (64 MiB, written
#: exactly as `25.875Gi`): whole GiB left up to 1,023 MiB unused on every node, and made any
#: co-tenant's last MiB cost the model pod a whole GiB of KV cache. The node's own headroom
#: (`catalog.NODE_HEADROOM_MIB`) is what covers the unrequested.
POD_MEMORY_STEPS_PER_GIB = 16


class PlanError(ConfigError):
    """A configuration that cannot start or serve, with the key to change and how."""


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
    #: Weight format served (`infra.plan.weights`), where its checkpoint comes from
    #: (`weightsSource`) and the GiB every rank loads.
    weights: str
    weights_source: str
    download_gib: float
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
    #: The Job that produces an int8 or int4 checkpoint (`weightsSource: quantize`), else None.
    quantize: QuantizeSpec | None
    #: Probe period and threshold, stall bound and client first-byte bound (`infra.plan.liveness`).
    liveness: Liveness
    #: vLLM's own caps (`infra.plan.vllm_key`), with the gatekeeper its limits (`frontdoor`).
    front_door: EndpointLimits | GatekeeperLimits
    reasons: tuple[str, ...]
    #: How a pod told to stop finishes its streams (`infra.plan.rollout`).
    drain: DrainSpec
    #: What a new pod template costs: surge groups, extra nodes, time, outage.
    rollout: RolloutPlan

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
        if not isinstance(self.front_door, EndpointLimits):
            data["front_door"] = self.front_door.to_json()
        if data["quantize"] is not None:
            del data["quantize"]["files"]  # the program's checkout, none in a plan
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


def _instance(cfg: StackConfig) -> InstanceType:
    name = cfg.instance_type
    if name != name.lower():
        # Refused, not folded: EC2 and EKS take the lower-case names only (pulumi-aws 7.51.1
        # `ec2/_enums.py` InstanceType values), and the stack file stays what AWS receives.
        raise PlanError(
            "instanceType",
            f"{name} is not an EC2 type name: EC2 instance type names are lower case",
            f"use {name.lower()}",
        )
    known = catalog.INSTANCE_TYPES.get(name)
    if known is not None and known.generation not in catalog.BF16_GENERATIONS:
        raise PlanError(
            "instanceType",
            f"{name} is {known.generation}, whose cores have no bf16 instructions; vLLM's Arm CPU "
            "backend serves bf16 weights from Graviton3 on",
            "choose a Graviton3 or Graviton4 type such as m7g.2xlarge",
        )
    if known is not None:
        return known
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


def _in_steps(gib: float) -> float:
    """`gib` rounded down to a whole `POD_MEMORY_STEPS_PER_GIB`th of a GiB."""
    return math.floor(gib * POD_MEMORY_STEPS_PER_GIB) / POD_MEMORY_STEPS_PER_GIB


def _pod_memory(cfg: StackConfig, budget: NodeBudget) -> float:
    if cfg.pod_memory_gib == "auto":
        pod = _in_steps(budget.free_gib)
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
            f"{cfg.pod_memory_gib:g} GiB is more than the {budget.free_gib:.2f} GiB a "
            f"{budget.instance.name} node can give after its other tenants",
            f"set it to at most {_in_steps(budget.free_gib):g} or auto, or choose a larger "
            "`instanceType`",
        )
    return float(cfg.pod_memory_gib)


def plan(cfg: StackConfig, stack: str = "dev") -> Plan:
    """Plan a stack, or raise `PlanError` saying why it cannot start and what to change."""
    instance = _instance(cfg)
    profile = cfg.profile()
    if profile.is_moe:  # in a format with no measured decode ratio: refused with its reason
        from infra.plan import moe  # the MoE layer, for a mixture-of-experts model only

        moe.check(profile)
    budget = node_budget(instance, cfg.model_cache_planned == "volume", cfg.gatekeeper)
    if budget.cpu < 1:
        raise PlanError(
            "instanceType",
            f"{instance.name} leaves no whole CPU for a model pod after its other tenants",
            "choose a type with at least 4 vCPU, such as m7g.2xlarge",
        )
    pod_gib = _pod_memory(cfg, budget)
    min_len, upper = _context_bounds(cfg, profile)
    chosen = _choose_split(cfg, instance, profile, pod_gib, budget.cpu, min_len, upper)
    result = _finish(cfg, stack, instance, profile, budget, pod_gib, chosen, min_len, upper)
    if cfg.weight_prefetch:
        result = replace(result, reasons=(*result.reasons, _without_prefetch(cfg, stack)))
    return result


def _context_bounds(cfg: StackConfig, profile: ModelProfile) -> tuple[int, int]:
    """The shortest context a split must serve and the longest the planner aims for."""
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
    return min_len, upper


def _choose_split(
    cfg: StackConfig,
    instance: InstanceType,
    profile: ModelProfile,
    pod_gib: float,
    cpu: int,
    min_len: int,
    upper: int,
) -> _Split:
    """Fewest stages that serve the target context; when none does, the split that serves the
    longest. A model that fits one node is never split just because it could be."""
    chosen = holding = None
    rejected: list[str] = []
    auto_stages = cfg.pipeline_stages == "auto"
    for stages in _stage_candidates(cfg, profile):
        ranks, kvs = rank_plans(profile, stages, pod_gib, cfg.weight_prefetch)
        tight = min(ranks, key=lambda r: r.guard_gib)
        if tight.free_gib <= 0 and auto_stages:
            need = tight.weights_gib + tight.overhead_gib
            rejected.append(f"{stages} stage(s) need {need:.1f} GiB per pod before any KV cache")
            continue
        kv_bytes = (
            auto_kv_bytes(tight.guard_gib) if cfg.kv_cache_bytes == "auto" else cfg.kv_cache_bytes
        )
        # The longest step is the last chunk of the longest prompt: judged at the target context.
        step_cap = liveness.max_batched_tokens(
            _prefill_model(profile, instance, cpu, ranks, cfg.prefill_path),
            upper,
            BATCHED_TOKEN_CHOICES,
        )
        batched, length = choose_batched(cfg, kvs, kv_bytes, upper, stages, step_cap)
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
    return chosen


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


@dataclass(frozen=True)
class _Startup:
    """Disk sizes and start-up times of a split."""

    node_disk_gib: int
    model_volume_gib: int
    cold_seconds: float
    restart_seconds: float
    timeout_seconds: int


def _finish(
    cfg: StackConfig,
    stack: str,
    instance: InstanceType,
    profile: ModelProfile,
    budget: NodeBudget,
    pod_gib: float,
    chosen: _Split,
    min_len: int,
    upper: int,
) -> Plan:
    """Check the chosen split against the stack's explicit keys and derive the whole plan."""
    _check_split(cfg, profile, pod_gib, chosen, min_len, upper)
    stages, ranks, kvs, tight = chosen.stages, chosen.ranks, chosen.kvs, chosen.tight
    kv_bytes, batched = chosen.kv_bytes, chosen.batched
    max_len = chosen.length if cfg.max_model_len == "auto" else cfg.max_model_len
    concurrency = kvs.concurrency(kv_bytes, max_len, batched)
    decode = _decode_tokens_per_s(profile, instance, budget, chosen)
    startup = _startup(cfg, profile, ranks)
    model = _prefill_model(profile, instance, budget.cpu, ranks, cfg.prefill_path)
    live = liveness.liveness(
        model,
        batched,
        max_len,
        None if cfg.first_byte_timeout_seconds == "auto" else cfg.first_byte_timeout_seconds,
    )
    _check_first_byte(cfg, live, max_len)
    if cfg.gatekeeper:
        from infra.plan.frontdoor import plan_front_door  # the gatekeeper layer

        door = plan_front_door(cfg, profile.name, max_len, concurrency, decode, live.first_byte_s)
    else:
        door = plan_endpoint(cfg, max_len, decode, live.first_byte_s)
    drain = rollout.plan_drain(door.reply_timeout_seconds)
    job = None
    if cfg.quantize_job:
        from infra.plan import quantize  # the quantize layer, for `weightsSource: quantize`

        job = quantize.stack_job(cfg, profile, pod_gib, budget.cpu, stages)
    grows = rollout.node_group_grows(cfg)
    rollout.check_surge(cfg.rollout_surge, grows)
    rolls = rollout.plan_rollout(
        setting=cfg.rollout_surge,
        grows=grows,
        replicas=cfg.replicas,
        stages=stages,
        instance_type=instance.name,
        cold_start_s=int(startup.cold_seconds),
        restart_s=int(startup.restart_seconds),
        drain=drain,
    )
    return Plan(
        stack=stack,
        model=profile.name,
        instance_type=instance.name,
        generation=instance.generation,
        nodes=stages * cfg.most_groups,
        stages=stages,
        replicas=cfg.most_groups,
        node_allocatable_gib=round_gib(budget.allocatable_gib),
        node_cotenants_gib=round_gib(budget.cotenants_gib),
        pod_memory_gib=pod_gib,
        pod_cpu=budget.cpu,
        ranks=tuple(
            replace(r, free_gib=round_gib(r.free_gib), guard_gib=round_gib(r.guard_gib))
            for r in ranks
        ),
        tightest_rank=tight.rank,
        guard_available_gib=round_gib(tight.guard_gib),
        weight_prefetch=cfg.weight_prefetch,
        model_cache=cfg.model_cache_planned,
        weights=cfg.weights,
        weights_source=cfg.weights_source,
        download_gib=round_gib(profile.download_bytes / GIB),
        kv_cache_bytes=kv_bytes,
        max_num_batched_tokens=batched,
        max_num_seqs=CPU_DEFAULT_MAX_SEQS_PER_RANK * stages,
        max_model_len=max_len,
        kv_needed_gib=round_gib(kvs.bytes_per_request(max_len, batched) / GIB),
        kv_cache_tokens=int(concurrency * max_len),
        max_concurrency=round(concurrency, 2),
        prefill_steps_at_max_len=cdiv(max_len, batched),
        decode_tokens_per_s=round(decode, 2),
        node_disk_gib=startup.node_disk_gib,
        model_volume_gib=startup.model_volume_gib,
        shm_gib=SHM_GIB,
        cold_start_seconds=int(startup.cold_seconds),
        warm_restart_seconds=int(startup.restart_seconds),
        startup_timeout_seconds=startup.timeout_seconds,
        vllm_image=cfg.vllm_image,
        quantize=job,
        liveness=live,
        front_door=door,
        drain=drain,
        rollout=rolls,
        reasons=plan_reasons(
            cfg, instance, budget, pod_gib, chosen, max_len, upper, concurrency, decode, live, model
        ),
    )


def _check_split(
    cfg: StackConfig,
    profile: ModelProfile,
    pod_gib: float,
    chosen: _Split,
    min_len: int,
    upper: int,
) -> None:
    """Refuse a split the stack forced that cannot start or cannot serve its settings."""
    stages, kvs, tight = chosen.stages, chosen.kvs, chosen.tight
    kv_bytes, batched, length = chosen.kv_bytes, chosen.batched, chosen.length
    guard = tight.guard_gib
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
            f"on rank {tight.rank} ({guard:.2f} GiB: {why_guard(cfg)})",
            f"set it to at most {auto_kv_bytes(guard)} or auto"
            + ("" if cfg.weight_prefetch else ", or set `weightPrefetch: true`"),
        )
    want = upper if cfg.max_model_len != "auto" else min_len
    if cfg.kv_cache_bytes != "auto" and cfg.max_model_len == "auto" and length < want:
        # The stack set the budget and left the context to the planner: the budget is the key.
        least = (kvs.blocks_per_request(want, batched) + 1) * max(kvs.bytes_per_block)
        most = auto_kv_bytes(guard)
        raise PlanError(
            "kvCacheBytes",
            f"{kv_bytes} holds KV for {length} tokens, fewer than the {want} one request "
            f"needs ({least / GIB:.2f} GiB per rank)",
            f"set it to at least {least} or auto"
            if least <= most
            else "set it to auto, or choose a larger `instanceType`",
        )
    if length == 0 or (cfg.max_model_len != "auto" and length < cfg.max_model_len):
        needed = kvs.bytes_per_request(want, batched)
        fits = longest_context(kvs, kv_bytes, batched, profile.max_context)
        raise PlanError(
            "maxModelLen",
            f"{want} tokens need {needed / GIB:.2f} GiB of KV cache per rank, more than the "
            f"{max(0, kvs.usable_bytes(kv_bytes)) / GIB:.2f} GiB available to it (vLLM would "
            f"estimate a maximum of {fits})",
            f"set it to at most {fits} or auto, or give the KV cache more memory",
        )
    if batched < CPU_DEFAULT_MAX_SEQS_PER_RANK * stages:
        raise PlanError(
            "maxNumBatchedTokens",
            f"{batched} is below vLLM's max_num_seqs of {CPU_DEFAULT_MAX_SEQS_PER_RANK * stages}",
            f"use at least {CPU_DEFAULT_MAX_SEQS_PER_RANK * stages}, or auto",
        )


def _prefill_model(
    profile: ModelProfile,
    instance: InstanceType,
    cpu: int,
    ranks: tuple[RankPlan, ...],
    path: str,
) -> liveness.Prefill:
    """The split's prefill work across the prefill rate's range on `path` (`infra.plan.prefill`)."""
    work = prefill.stage_work(profile, [(r.sliding_layers, r.full_layers) for r in ranks])
    slow, mid, fast = prefill.nodes(instance, cpu, profile.weights, path)
    return liveness.Prefill(profile, work, slow, mid, fast, path)


def _check_first_byte(cfg: StackConfig, live: Liveness, max_len: int) -> None:
    """A first-byte bound below the slowest modelled prefill would cut off healthy replies."""
    least = max(liveness.MIN_FIRST_BYTE_S, math.ceil(live.prefill_max_len_s + live.probes.stall_s))
    if cfg.first_byte_timeout_seconds != "auto" and cfg.first_byte_timeout_seconds < least:
        raise PlanError(
            "firstByteTimeoutSeconds",
            f"{cfg.first_byte_timeout_seconds} s is below the slowest modelled first token of a "
            f"{max_len}-token prompt ({live.prefill_max_len_s:.0f} s) plus the stall bound "
            f"({live.probes.stall_s} s)",
            f"set it to at least {least} or auto, or lower `maxModelLen`",
        )


def _decode_tokens_per_s(
    profile: ModelProfile, instance: InstanceType, budget: NodeBudget, chosen: _Split
) -> float:
    """Each token streams every stage's weights in series at the nodes' memory bandwidth (a
    mixture of experts: its measured ratio to the dense model's, `infra.plan.moe`)."""
    decode_seconds = 0.0
    if profile.is_moe:
        from infra.plan import moe  # the MoE layer, for a mixture-of-experts model only
    for rank in chosen.ranks:
        dense = rank.layers * profile.layer_bytes
        read = moe.step_weight_bytes(profile, rank.layers) if profile.is_moe else dense
        if rank.rank == chosen.stages - 1:
            read += profile.embedding_bytes  # the output head is read for every token
        decode_seconds += read / (catalog.node_decode_gbps(instance, budget.cpu) * 1e9)
    return 1 / decode_seconds


def _startup(cfg: StackConfig, profile: ModelProfile, ranks: tuple[RankPlan, ...]) -> _Startup:
    checkpoint_gib = profile.download_bytes / GIB
    volume_gib = math.ceil(checkpoint_gib * (1 + DISK_MARGIN))
    # The OS, an old and a new image during an upgrade, and (without a volume) the weights'
    # emptyDir up to its size limit.
    on_node = (
        catalog.NODE_OS_DISK_GIB + catalog.IMAGES_ON_NODE_DURING_UPGRADE * catalog.IMAGE_DISK_GIB
    )
    if cfg.model_cache_planned == "none":
        on_node += volume_gib
    if cfg.quantize_job:
        from infra.plan import quantize  # the quantize layer, for `weightsSource: quantize`

        # The quantize Job's scratch space: the bf16 download and the installed quantizer.
        on_node += quantize.scratch_gib(profile)
    disk = int(10 * math.ceil(on_node * (1 + DISK_MARGIN) / 10))
    # A produced checkpoint is on the volume before the group starts (the quantize Job).
    download = 0 if cfg.quantize_job else profile.download_bytes / (cfg.download_mbps * 1e6)
    load = max(r.weights_gib for r in ranks) * catalog.LOAD_SECONDS_PER_GIB
    warm = load + catalog.WARMUP_SECONDS
    cold = download + warm
    restart = warm if cfg.model_cache_planned == "volume" else cold
    startup = max(MIN_STARTUP_SECONDS, math.ceil(2 * cold / 60) * 60)
    return _Startup(disk, volume_gib, cold, restart, startup)
