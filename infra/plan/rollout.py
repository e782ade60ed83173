"""How a change reaches the running groups: the drain of a pod told to stop, and the rollout of a
new pod template. Pure; the planner calls `plan_drain` and `plan_rollout`, the pods and the
LeaderWorkerSet are built from what they return, and the plan prints both.

The drain, for a leader told to stop (a rollout, a node drain, a scale-down), in order:
1. the pod is terminating: its endpoint is no longer ready, so kube-proxy's health check for the
   Service (`externalTrafficPolicy: Local`) answers 503 on its node and the NLB marks the node
   unhealthy after `unhealthy_threshold` checks `interval_s` apart; until then new connections
   still arrive and are served (kube-proxy routes them to the serving, terminating endpoint);
2. after that window (`accept_s`) the gatekeeper's readiness fails and nginx quits gracefully: it
   stops listening and finishes every request in flight;
3. vLLM's preStop waits until the gatekeeper no longer listens and no request is in the engine,
   within the reply timeout, and only then is vLLM sent SIGTERM; the headless ranks wait until
   their leader's engine is gone.
The NLB keeps the node's open connections meanwhile (connection termination of unhealthy targets
off, a draining interval as long as the last accepted reply may run).

The rollout: with a node autoscaler the LeaderWorkerSet rolls with `maxSurge` extra groups and
`maxUnavailable` 0 (lws v0.10.0 pkg/controllers/leaderworkerset_controller.go
`rollingUpdateParameters`: the surge groups are created first from the new template, at most
`replicas` of them; then old groups are recreated `maxSurge` at a time, each only after its
predecessor is gone, and the surge groups are removed once every group is updated and ready). A
fixed node group has no room for a surge group: the groups roll one at a time in place, which with
one group is an outage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.manifests.drain import READY_PERIOD_S, DrainSpec, grace
from infra.plan import prices
from infra.plan.config import ConfigError, StackConfig

#: The NLB's health check of a Service with `externalTrafficPolicy: Local`, as cloud-provider-aws
#: builds it by default (pkg/providers/v1/aws.go `buildNLBHealthCheckConfiguration`, v1.35.2 read
#: 2026-12-02: HTTP to the health-check node port, interval 10 s, timeout 10 s, both thresholds
#: 2); the Service states them, so they cannot drift from the drain built on them. A changed
#: interval would make the provider recreate the target group (aws_loadbalancer.go).
HEALTH_CHECK_INTERVAL_S = 10
HEALTH_CHECK_TIMEOUT_S = 10
HEALTH_CHECK_THRESHOLD = 2
#: The pod's endpoint change reaching kube-proxy and its health check on the node (modelled; the
#: slow end of a watch and a sync).
ENDPOINT_PROPAGATION_S = 5
#: vLLM must stay idle this long before its preStop lets it stop (a request the gatekeeper
#: accepted just before quitting is in the engine within it).
SETTLE_S = 5
#: The NLB's limit on `deregistration_delay.timeout_seconds` (ELB API TargetGroupAttribute,
#: docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/API_TargetGroupAttribute.html,
#: read 2026-12-02: 0-3600).
MAX_DEREGISTRATION_S = 3600
#: A new node from the autoscaler's request to a schedulable node with the images pulled
#: (modelled: EC2 launch, AL2023 boot, node registration, the vLLM image pull).
NODE_LAUNCH_S = 180


def plan_drain(reply_timeout_s: int) -> DrainSpec:
    """The drain of a pod whose longest reply runs `reply_timeout_s`."""
    # Slow end of the detection: the last passing check starts just before the endpoint changes,
    # then `threshold` failing checks, each allowed its whole timeout.
    accept = (
        ENDPOINT_PROPAGATION_S
        + HEALTH_CHECK_INTERVAL_S * HEALTH_CHECK_THRESHOLD
        + HEALTH_CHECK_TIMEOUT_S
    )
    deregistration = min(accept, MAX_DEREGISTRATION_S)
    return DrainSpec(
        health_check_interval_s=HEALTH_CHECK_INTERVAL_S,
        health_check_timeout_s=HEALTH_CHECK_TIMEOUT_S,
        health_check_threshold=HEALTH_CHECK_THRESHOLD,
        accept_s=accept,
        reply_s=reply_timeout_s,
        settle_s=SETTLE_S,
        deregistration_delay_s=deregistration,
        unhealthy_draining_s=accept + reply_timeout_s,
        grace_s=grace(max(accept, deregistration), reply_timeout_s, SETTLE_S),
    )


@dataclass(frozen=True)
class RolloutPlan:
    """What a change of the pod template costs: the strategy, the extra nodes, how long, and
    whether the endpoint goes without an answer. Times are modelled with no stream in flight
    when a group drains (the LB's window and the idle check); a stream in flight can hold its
    group up to the reply timeout longer (`drain_bound_s` in all)."""

    #: The model node group can add nodes (a node autoscaler is there to add them).
    grows: bool
    #: LeaderWorkerSet `maxSurge` and `maxUnavailable`.
    surge_groups: int
    max_unavailable: int
    #: Nodes the surge groups need above the running ones (the node group's max must allow them).
    surge_nodes: int
    #: Waves of old groups recreated after the surge groups serve.
    waves: int
    #: The whole rollout, modelled from the plan's cold start, restart and drain.
    seconds: int
    #: The surge nodes' cost for that long (None: no price in the catalogue).
    surge_usd: float | None
    #: Seconds without an answer (0: none).
    outage_s: int
    #: The longest one group's drain may take (its pods' grace).
    drain_bound_s: int


def node_group_grows(cfg: StackConfig) -> bool:
    """The model node group can add nodes for pods that wait: an elastic stack's (`minGroups`
    0, or `maxGroups` above `minGroups`), whose node autoscaler adds them. A fixed stack's node
    group is min = desired = max (`components.cluster`): nothing adds a node to it."""
    # Read by name: the elastic keys are optional fields of the config model.
    low, high = getattr(cfg, "min_groups", None), getattr(cfg, "max_groups", None)
    if low is None and high is None:
        return False
    return low == 0 or (high is not None and high > (low if low is not None else cfg.replicas))


def check_surge(setting: int | str, grows: bool) -> None:
    """Refuse surge groups no node can be added for: their pods would wait for ever and the
    rollout would never finish."""
    if setting != "auto" and int(setting) > 0 and not grows:
        raise ConfigError(
            "rolloutSurge",
            f"is {setting}, but this stack's node group is fixed (no node autoscaler adds nodes "
            "for a surge group, so its pods would wait for ever)",
            "set it to 0 or auto (a change then restarts the groups in place), or make the "
            "stack elastic with `maxGroups`",
        )


def surge_groups(setting: int | str, grows: bool, replicas: int) -> int:
    """`rolloutSurge` resolved: auto is one group when the node group can grow; LWS never
    surges more groups than `replicas`."""
    wanted = (1 if grows else 0) if setting == "auto" else int(setting)
    return min(wanted, replicas)


def plan_rollout(
    *,
    setting: int | str,
    grows: bool,
    replicas: int,
    stages: int,
    instance_type: str,
    cold_start_s: int,
    restart_s: int,
    drain: DrainSpec,
) -> RolloutPlan:
    """The rollout of a new pod template for `replicas` groups of `stages` nodes."""
    surge = surge_groups(setting, grows, replicas)
    # A drain with no stream in flight: the LB's window, the readiness period and the idle
    # check; the bound is the pods' grace.
    drain_s = drain.accept_s + drain.settle_s + READY_PERIOD_S
    if surge:
        waves = math.ceil(replicas / surge)
        seconds = NODE_LAUNCH_S + cold_start_s + waves * (drain_s + restart_s)
        price = prices.ec2_price(instance_type)
        cost = None if price is None else round(surge * stages * price.usd * seconds / 3600, 2)
        return RolloutPlan(grows, surge, 0, surge * stages, waves, seconds, cost, 0, drain.grace_s)
    seconds = replicas * (drain_s + restart_s)
    # With one group the endpoint is without an answer from the LB's window to the restart.
    outage = drain.settle_s + READY_PERIOD_S + restart_s if replicas == 1 else 0
    return RolloutPlan(grows, 0, 1, 0, replicas, seconds, 0.0, outage, drain.grace_s)
