"""Groups that follow the queue and the clock: the scaling parameters KEDA is configured with, the
wake-up time from zero, the node quota at the most groups and the cost at the fewest, the most
and over a month of the schedule. Pure: the plan prints it, `--json` carries it, the program
builds the ScaledObject and the node groups from it, and the scaling simulation replays a day of
load through its `ScalerSpec`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from dataclasses import dataclass

from components.manifests import scaling as keda
from infra.plan import catalog, liveness, readiness
from infra.plan.config import ConfigError, StackConfig
from infra.plan.config_parts import WEEKDAYS
from infra.plan.costs import stack_costs
from infra.plan.economics import cost_inputs
from infra.plan.prices import HOURS_PER_MONTH, ec2_price
from infra.plan.sizing import Plan

#: The Horizontal Pod Autoscaler's default tolerance: no change while the ratio of the metric to
#: its target is within 10 % of 1 (kube-controller-manager --horizontal-pod-autoscaler-tolerance,
#: default 0.1). KEDA leaves it at that.
TOLERANCE = 0.1
#: How often KEDA asks the leaders for their queue (seconds; the ScaledObject's
#: `pollingInterval`, KEDA's default 30 s, keda-docs content/docs/2.20/reference/
#: scaledobject-spec.md, read 2026-12-02). 15 s: a queue is seen at most 15 s late, next to a
#: wake-up of minutes; each poll is one HTTP GET per leader, nothing billed.
POLLING_SECONDS = 15
#: The queue trigger's deadline per leader (`components.manifests.scaling`) must lie above the
#: leaders' own `/metrics` bound and below a poll.
if not liveness.PROBE_REQUEST_S < keda.METRICS_TIMEOUT_SECONDS < POLLING_SECONDS:
    raise ValueError("the queue trigger's timeout must lie between the leaders' bound and a poll")
#: The HPA controller's sync period (kube-controller-manager --horizontal-pod-autoscaler-sync-
#: period, default 15 s): the second half of the metric path's lag.
HPA_SYNC_SECONDS = 15
#: The Cluster Autoscaler removes a model node this long after its last group pod left
#: (`--scale-down-unneeded-time`, set in components/autoscaling.py `autoscaler_values`).
SCALE_DOWN_UNNEEDED_SECONDS = 600
#: Slack for the idle-nodes alarm past the node's removal: the autoscaler's scan (10 s,
#: `--scan-interval` default, cluster-autoscaler 1.35.0 FAQ.md parameters table), the instance's
#: termination and the one-minute periods of the alarm's metrics.
IDLE_ALARM_SLACK_SECONDS = 60
#: Scale-up stabilisation: a short window so one poll's spike does not start a group.
UP_WINDOW_SECONDS = 30
#: The HPA's own scale-down default (300 s); the planned window is never shorter.
MIN_DOWN_WINDOW_SECONDS = 300
#: Node launch to Ready: EC2 boot, nodeadm's join, the VPC CNI's first address. Modelled, no
#: measurement yet; the safe end for the scale-down window is the long one.
NODE_READY_SECONDS = 120
#: The vLLM CPU image's compressed layers, pulled on every new node: modelled as half of what it
#: holds on disk unpacked (`catalog.IMAGE_DISK_GIB`), pulled at `downloadMBps`.
IMAGE_PULL_GIB = catalog.IMAGE_DISK_GIB / 2
#: Attaching a rank's EBS weights volume to its new node (modelled).
VOLUME_ATTACH_SECONDS = 30
#: The model node group's maximum size, fixed: no stack key moves it. The Cluster Autoscaler adds
#: nodes only for pods that wait, and the pods are bounded elsewhere (KEDA's `maxReplicaCount` is
#: `maxGroups`, the LeaderWorkerSet's surge is `rolloutSurge`, the vCPU quota check counts both),
#: so the maximum is only a ceiling. It must not follow them: a changed `maxSize` makes the AWS
#: provider send the whole scaling block to `UpdateNodegroupConfig`, the desired size included
#: (hashicorp/terraform-provider-aws internal/service/eks/node_group.go `resourceNodeGroupUpdate`,
#: `d.HasChange("scaling_config")` then `expandNodegroupScalingConfig`, which sets `DesiredSize`;
#: commit 012e0a32 read 2026-12-03), and with `ignoreScalingChanges` that desired size is the one
#: in Pulumi's state, not the autoscaler's: "Pulumi will continue to send those stale values to
#: the provider" without a refresh (pulumi docs content/docs/iac/concepts/options/
#: ignorechanges.md, read 2026-12-03). The deploy never refreshes, so a `maxGroups` edit would
#: set the group back to the size it was created with (0) and EKS would terminate the serving
#: nodes. 100: a round ceiling above every stack the planner accepts today (`elastic_plan`
#: refuses one that needs more, naming `maxGroups`).
MODEL_NODES_CEILING = 100
#: The always-on system nodes: the smallest Graviton type that holds the system pods.
SYSTEM_INSTANCE_TYPE = "m7g.large"


#: The Cluster Autoscaler image per Kubernetes minor: the latest patch of the release whose minor
#: is the cluster's, as the autoscaler asks (kubernetes/autoscaler cluster-autoscaler/README.md,
#: "use the _latest_ Cluster Autoscaler release that corresponds to the minor version of
#: Kubernetes"), read from the repository's release tags `cluster-autoscaler-1.MINOR.PATCH`
#: (tags dated 2026-02-13 for 1.32.7, 2026-07-22 for the others; read 2026-12-02), image
#: registry.k8s.io/autoscaling/cluster-autoscaler, the chart's default repository (chart 9.59.0
#: values.yaml). One tag for every minor is wrong: 1.35 turns dynamic resource allocation on and
#: waits for `resource.k8s.io/v1`, which a cluster serves only from 1.34 (kubernetes/autoscaler
#: issue 9244, "stopped working" on EKS 1.32), so it never scales an older cluster.
AUTOSCALER_TAGS: dict[str, str] = {
    "1.32": "v1.32.7",
    "1.33": "v1.33.6",
    "1.34": "v1.34.5",
    "1.35": "v1.35.2",
}


def autoscaler_tag(kubernetes_version: str) -> str:
    """The Cluster Autoscaler image tag for `kubernetes_version` (its minor, latest patch)."""
    tag = AUTOSCALER_TAGS.get(kubernetes_version)
    if tag is None:
        newest = max(AUTOSCALER_TAGS, key=lambda v: int(v.split(".")[1]))
        raise ConfigError(
            "kubernetesVersion",
            f"{kubernetes_version} has no pinned Cluster Autoscaler release "
            "(infra/plan/elastic.py AUTOSCALER_TAGS)",
            f"use {newest}, or add the latest cluster-autoscaler v{kubernetes_version}.x tag",
        )
    return tag


@dataclass(frozen=True)
class SystemGroup:
    """The small always-on node group for the pods that must run while the model sleeps."""

    instance_type: str
    nodes: int
    millicpu: int
    memory_mib: int
    pods: tuple[str, ...]


@dataclass(frozen=True)
class ElasticPlan:
    """An elastic stack's figures beside its plan (which is sized at `maxGroups`)."""

    scaling: keda.ScalerSpec
    #: Wake-up from zero with the weights on a volume and without (download), seconds.
    wake_with_volume_s: int
    wake_without_volume_s: int
    system: SystemGroup
    #: Model nodes up with no leader Ready for longer than this raise the idle-nodes alarm
    #: (`idle_alarm_seconds`).
    idle_alarm_s: int
    #: Model nodes the stack may run at once: the most groups' nodes plus a replacement's and a
    #: rollout's surge (the node group's own maximum is `MODEL_NODES_CEILING`, above it).
    model_nodes_max: int
    vcpus_at_most: int
    usd_month_fewest: float | None
    usd_month_most: float | None
    usd_month_schedule: float | None

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def wake_seconds(cfg: StackConfig, p: Plan, volume: bool) -> int:
    """A group's wake-up from zero nodes (modelled): a node, the image, then the plan's own
    cold start (download, load, warm-up) or, with the weights on a volume, its restart."""
    profile = cfg.profile()
    pull = IMAGE_PULL_GIB * catalog.GIB / (cfg.download_mbps * 1e6)
    load = max(r.weights_gib for r in p.ranks) * catalog.LOAD_SECONDS_PER_GIB
    warm = load + catalog.WARMUP_SECONDS
    engine = VOLUME_ATTACH_SECONDS + warm
    if not volume:
        engine = profile.checkpoint_bytes / (cfg.download_mbps * 1e6) + warm
    return math.ceil(NODE_READY_SECONDS + pull + engine)


def scaling_parameters(cfg: StackConfig, p: Plan) -> keda.ScalerSpec:
    """KEDA's settings for an elastic stack. The scale-down window and the cooldown are at
    least one planned wake-up, so a group is never started and dropped within one start-up."""
    if cfg.min_groups is None or cfg.max_groups is None:
        raise ValueError("scaling_parameters needs an elastic stack (minGroups and maxGroups)")
    cold = wake_seconds(cfg, p, cfg.model_cache == "volume")
    # The long end of the wake-up (its modelled node and pull phases) sets the window: a shorter
    # window could drop a group whose start-up the queue has not yet seen pay off.
    down = max(MIN_DOWN_WINDOW_SECONDS, 60 * math.ceil(cold / 60))
    queue = (
        max(1, math.floor(p.max_concurrency))
        if cfg.queue_per_group == "auto"
        else cfg.queue_per_group
    )
    window = cfg.schedule
    return keda.ScalerSpec(
        min_groups=cfg.min_groups,
        max_groups=cfg.max_groups,
        queue_per_group=queue,
        running_per_group=p.max_num_seqs,
        tolerance=TOLERANCE,
        up_window_s=UP_WINDOW_SECONDS,
        down_window_s=down,
        cooldown_s=down,
        polling_s=POLLING_SECONDS,
        metric_lag_s=POLLING_SECONDS + HPA_SYNC_SECONDS,
        cold_start_s=cold,
        nodes_per_group=p.stages,
        schedule=None
        if window is None
        else keda.CronWindow(
            time_zone=window.time_zone,
            weekdays=window.weekdays,
            start=window.start,
            end=window.end,
            groups_inside=window.groups_inside,
            groups_outside=cfg.min_groups,
            hours_a_week=window.hours_a_week,
        ),
    )


#: Pods on the system nodes (requests as their charts and add-ons ship them, `catalog.COTENANTS`
#: for the ones the model nodes counted before): (name, millicpu, memory MiB, replicas).
_KEDA = "KEDA chart 2.20.2 values.yaml resources.*.requests"
SYSTEM_PODS: tuple[tuple[str, int, int, int], ...] = (
    ("keda-operator", 100, 100, 1),  # _KEDA
    ("keda-metrics-apiserver", 100, 100, 1),  # _KEDA
    ("keda-admission-webhooks", 100, 100, 1),  # _KEDA
    # Set in components/autoscaling.py (the chart ships none).
    ("cluster-autoscaler", 100, 300, 1),
    # The always-on front door (two gatekeepers, branch i25-sleep's door Deployment).
    ("door", catalog.GATEKEEPER_MILLICPU, catalog.GATEKEEPER_MEMORY_MIB, 2),
    # The queue floor KEDA's queue trigger always finds (components/manifests/scaling.py).
    ("queue-floor", keda.FLOOR_MILLICPU, keda.FLOOR_MEMORY_MIB, keda.FLOOR_REPLICAS),
)


def system_group(cfg: StackConfig) -> SystemGroup:
    """Enough `SYSTEM_INSTANCE_TYPE` nodes for CoreDNS, the LWS controller, the CloudWatch
    controller, the EBS CSI controller (with volumes), the metrics collector, KEDA, the Cluster
    Autoscaler, the door and the queue floor, after each node's DaemonSets; two at least, so
    draining one (an upgrade) leaves the webhooks KEDA and LWS need answering."""
    instance = catalog.INSTANCE_TYPES[SYSTEM_INSTANCE_TYPE]
    volumes = cfg.model_cache == "volume"
    kept = [
        c for c in catalog.COTENANTS if (volumes or not c.with_volumes_only) and c.kind != "sidecar"
    ]
    daemons = [c for c in kept if c.kind == "daemonset"]
    pods = [(c.name, c.millicpu, c.memory_mib, c.replicas) for c in kept if c.kind == "deployment"]
    pods += list(SYSTEM_PODS)
    cpu = sum(m * n for _, m, _, n in pods)
    mem = sum(m * n for _, _, m, n in pods)
    free_cpu = catalog.allocatable_millicpu(instance) - sum(c.millicpu for c in daemons)
    free_mib = (
        catalog.allocatable_mib(instance)
        - sum(c.memory_mib for c in daemons)
        - catalog.NODE_HEADROOM_MIB
    )
    nodes = max(2, math.ceil(cpu / free_cpu), math.ceil(mem / free_mib))
    return SystemGroup(
        SYSTEM_INSTANCE_TYPE, nodes, cpu, mem, tuple(f"{n} x{r}" for n, _, _, r in pods)
    )


def idle_alarm_seconds(s: keda.ScalerSpec, wake_without_volume_s: int) -> int:
    """How long model nodes may be up with no leader Ready before the idle-nodes alarm fires:
    zero groups (`to_zero_s`), then the autoscaler's removal of the emptied nodes, plus slack;
    and never within the slowest planned wake-up (a first start downloads the weights), whose
    nodes are up before any leader is Ready. In whole minutes (the alarm's periods)."""
    held = s.to_zero_s + SCALE_DOWN_UNNEEDED_SECONDS
    return 60 * math.ceil((max(held, wake_without_volume_s) + IDLE_ALARM_SLACK_SECONDS) / 60)


def idle_alarm(cfg: StackConfig, p: Plan) -> int:
    """The idle-nodes alarm's clock of an elastic stack (`idle_alarm_seconds`)."""
    return idle_alarm_seconds(scaling_parameters(cfg, p), wake_seconds(cfg, p, volume=False))


def check_quota(cfg: StackConfig, p: Plan) -> None:
    """Refuse a `maxGroups` whose nodes at the peak of a change (a node replacement's surge or
    an `instanceType` change's second node group, a rollout's surge, and the system nodes) the
    stated vCPU quota cannot launch; name the most groups that fit."""
    if cfg.vcpu_quota is None or cfg.max_groups is None:
        return
    need = vcpus_at_most(cfg, p)
    if cfg.vcpu_quota >= need:
        return
    vcpu = catalog.INSTANCE_TYPES[p.instance_type].vcpu
    system = need - readiness.vcpus_needed(p)[1]
    fits = max(
        (
            groups
            for groups in range(cfg.max_groups)
            if readiness.peak_nodes(groups * p.stages, p.rollout.surge_nodes) * vcpu + system
            <= cfg.vcpu_quota
        ),
        default=0,
    )
    fix = (
        f"use `maxGroups: {fits}`, or ask AWS to raise quota {readiness.QUOTA_CODE} to {need}"
        if fits > (cfg.min_groups or 0)
        else f"ask AWS to raise quota {readiness.QUOTA_CODE} in {cfg.region} to {need} and set "
        f"`vcpuQuota` to {need}"
    )
    peak = readiness.peak_nodes(p.nodes, p.rollout.surge_nodes)
    raise ConfigError(
        "maxGroups",
        f"{cfg.max_groups} groups need {need} vCPUs ({p.nodes} x {p.instance_type}, {peak} at the "
        "peak of a change: a node replacement's or an `instanceType` change's extra nodes and a "
        f"rollout's surge; and the system nodes), above `vcpuQuota` {cfg.vcpu_quota}",
        fix,
    )


def check_ceiling(cfg: StackConfig, p: Plan) -> None:
    """Refuse a `maxGroups` whose nodes (with their surge) exceed the node group's fixed
    maximum; name the most groups that fit."""
    need = p.nodes + surge_nodes(p)
    if cfg.max_groups is None or need <= MODEL_NODES_CEILING:
        return
    # The surge stays what it is (fewer groups never need more of it).
    fits = (MODEL_NODES_CEILING - surge_nodes(p)) // p.stages
    raise ConfigError(
        "maxGroups",
        f"is {cfg.max_groups}, but its groups of {p.stages} node(s) need {need} model nodes "
        f"with their surge, above the model node group's fixed maximum of {MODEL_NODES_CEILING} "
        "(infra/plan/elastic.py MODEL_NODES_CEILING)",
        f"use `maxGroups: {max(fits, 1)}` or fewer",
    )


def surge_nodes(p: Plan) -> int:
    """Nodes above the most groups' own: a node replacement's and a rollout's surge."""
    return readiness.SURGE_NODES + p.rollout.surge_nodes


def nodes_total_cap(cfg: StackConfig, p: Plan) -> int:
    """The Cluster Autoscaler's `--max-nodes-total`: every node the stack plans at the peak of a
    change (`readiness.peak_nodes` at the most groups, the node group's ceiling being far above
    it) and the system nodes. Whatever leaves pods pending, the autoscaler never launches more:
    the fixed node-group maximum (`MODEL_NODES_CEILING`) is no longer a cost bound."""
    return readiness.peak_nodes(p.nodes, p.rollout.surge_nodes) + system_group(cfg).nodes


def vcpus_at_most(cfg: StackConfig, p: Plan) -> int:
    """vCPUs at the most groups: their nodes at the peak of a change (`readiness.peak_nodes`)
    and the system nodes."""
    _, replacing = readiness.vcpus_needed(p)
    system = system_group(cfg)
    return replacing + system.nodes * catalog.INSTANCE_TYPES[system.instance_type].vcpu


def month_usd(cfg: StackConfig, p: Plan, groups: int, today: dt.date) -> float | None:
    """The stack's monthly cost with `groups` groups running all month and the system nodes."""
    cost = stack_costs(
        cost_inputs(
            cfg,
            p,
            nodes=groups * p.stages,
            checkpoint_bytes=cfg.profile().checkpoint_bytes,
            aggregate_tokens_per_s=0.0,
        ),
        today,
    )
    system = system_group(cfg)
    price = ec2_price(system.instance_type)
    if cost.usd_per_month is None or price is None:
        return None
    return round(cost.usd_per_month + system.nodes * price.usd * HOURS_PER_MONTH, 2)


def elastic_plan(cfg: StackConfig, p: Plan, today: dt.date) -> ElasticPlan | None:
    """The elastic figures of a stack, None for a fixed one. Refuses a `maxGroups` the quota
    cannot launch."""
    if not cfg.elastic:
        return None
    check_quota(cfg, p)
    check_ceiling(cfg, p)
    scaling = scaling_parameters(cfg, p)
    fewest = month_usd(cfg, p, scaling.min_groups, today)
    most = month_usd(cfg, p, scaling.max_groups, today)
    schedule = None
    if fewest is not None and most is not None and scaling.schedule is not None:
        share = scaling.schedule.hours_a_week / (7 * 24)
        inside = month_usd(cfg, p, scaling.schedule.groups_inside, today)
        schedule = None if inside is None else round(fewest + (inside - fewest) * share, 2)
    return ElasticPlan(
        scaling=scaling,
        wake_with_volume_s=wake_seconds(cfg, p, volume=True),
        wake_without_volume_s=wake_seconds(cfg, p, volume=False),
        system=system_group(cfg),
        idle_alarm_s=idle_alarm(cfg, p),
        model_nodes_max=p.nodes + surge_nodes(p),
        vcpus_at_most=vcpus_at_most(cfg, p),
        usd_month_fewest=fewest,
        usd_month_most=most,
        usd_month_schedule=schedule,
    )


def _window(w: keda.CronWindow) -> str:
    names = ",".join(WEEKDAYS[d] for d in w.weekdays)
    return (
        f"{names} {w.start}-{w.end} {w.time_zone}: {w.groups_inside} group(s) "
        f"inside, {w.groups_outside} outside ({w.hours_a_week:g} h a week)"
    )


def describe(e: ElasticPlan) -> list[tuple[str, str]]:
    """The plan table's rows of an elastic stack."""
    s = e.scaling
    rows = [
        ("groups", f"{s.min_groups} to {s.max_groups}, {s.nodes_per_group} node(s) each"),
        (
            "scale on queue",
            f"another group per {s.queue_per_group} waiting request(s) (tolerance "
            f"{s.tolerance:g}); seen within {s.metric_lag_s} s; a group is held while it serves",
        ),
        (
            "scale windows",
            f"up {s.up_window_s} s, down {s.down_window_s} s (>= one wake-up), last group after "
            f"{s.cooldown_s} s idle (nothing waiting or served)",
        ),
        (
            "wake-up from zero",
            f"~{s.cold_start_s} s modelled (with weights volume ~{e.wake_with_volume_s} s, "
            f"without ~{e.wake_without_volume_s} s)",
        ),
        (
            "back to zero",
            f"no trigger active (outside the schedule, no Ready leader's queue, no request at "
            f"the door): 0 groups within {s.to_zero_s} s (cooldown {s.cooldown_s} s + one "
            f"{s.polling_s} s poll), the queue floor keeps the trigger answering; idle-nodes "
            f"alarm after {e.idle_alarm_s} s of model nodes with no Ready leader",
        ),
        ("schedule", _window(s.schedule) if s.schedule else "none: the queue alone"),
        (
            "system nodes",
            f"{e.system.nodes} x {e.system.instance_type} always on "
            f"({e.system.millicpu} millicpu, {e.system.memory_mib} MiB requested)",
        ),
        (
            "model node group",
            f"0 to {e.model_nodes_max} nodes (the most groups' nodes + "
            f"{e.model_nodes_max - s.max_groups * s.nodes_per_group} surge: a node "
            "replacement's and a rollout's), Cluster Autoscaler; the group's maximum is fixed "
            f"at {MODEL_NODES_CEILING}, so no key's edit resizes it",
        ),
        ("vcpu quota at most", f"{e.vcpus_at_most} vCPUs (model, surge and system nodes)"),
    ]
    money = [
        ("cost, fewest groups", e.usd_month_fewest, "all month"),
        ("cost, most groups", e.usd_month_most, "all month"),
        ("cost, schedule month", e.usd_month_schedule, "the window's groups, else the fewest"),
    ]
    rows += [(k, f"${v:,.2f}/month ({why})") for k, v, why in money if v is not None]
    return rows
