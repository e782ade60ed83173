"""The drain of a pod told to stop, and what keeps groups serving during voluntary disruptions:
the preStop hooks (the gatekeeper's own, with its readiness marker, is `gatekeeper.pre_stop`;
the PodDisruptionBudget is `lws.pod_disruption_budget`). Pure.

The order (the plan's `infra.plan.rollout` explains each bound):
1. the gatekeeper keeps accepting for `accept_s`, the time the NLB may still send new
   connections to a terminating leader's node; then it writes the drain marker, so its readiness
   (`/ready`) fails, and quits gracefully (nginx SIGQUIT: it stops listening and finishes the
   requests in flight, within `worker_shutdown_timeout`; a keyed body still arriving then finds
   the check server's listener closed and is told busy, 503 with Retry-After, which OpenAI
   clients retry);
2. vLLM's preStop, started at the same moment, waits until the gatekeeper no longer listens and
   the engine has held no request for `settle_s`, within `reply_s`; then the kubelet sends
   vLLM SIGTERM;
3. a headless rank's preStop waits until its leader's engine no longer holds the group's port
   (the leader's vLLM has stopped), within the same bounds, so the pipeline outlives every
   stream.
The kubelet runs the containers' preStop hooks in parallel and stops liveness and startup probes
once a pod is being deleted, readiness going on (kubernetes pkg/kubelet/prober/worker.go
`doProbe`, "Graceful shutdown of the pod", read 2026-12-02), so a worker's liveness check of its
draining leader cannot restart it mid-stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.manifests import programs

#: The readiness period of the gatekeeper and of a leader behind a door: a drain shows within it.
READY_PERIOD_S = 5
#: The longest one round of the engine hook's polling takes (`programs/drain.py`: /metrics 5 s,
#: a connect 2 s, the pause 1 s): its waits end this long before the hooks' end.
POLL_ROUND_S = 8
#: After the hooks: SIGTERM to vLLM's exit (modelled: its API server and engine processes shut
#: down in seconds), and the kubelet's own slack.
STOP_MARGIN_S = 15


def grace(accept_s: int, reply_s: int, settle_s: int) -> int:
    """The pods' `terminationGracePeriodSeconds`, at the safe end: the load balancer's window,
    the readiness period before nginx stops listening, a reply accepted at its last moment, the
    idle check, one round of polling, then vLLM's stop. The kubelet counts the hooks' time inside
    it and abandons a hook at its end (kubernetes pkg/kubelet/kuberuntime/kuberuntime_container.go
    `killContainer`, `executePreStopHook`)."""
    return accept_s + READY_PERIOD_S + reply_s + settle_s + POLL_ROUND_S + STOP_MARGIN_S


def hooks_end(spec: DrainSpec) -> int:
    """Seconds after the stop by which every preStop has returned: the grace less vLLM's stop."""
    return spec.grace_s - STOP_MARGIN_S


@dataclass(frozen=True)
class DrainSpec:
    """The bounds of a drain, in whole seconds, as the planner sets them
    (`infra.plan.rollout.plan_drain`) and the pods and the Service take them."""

    #: The NLB's health check of the nodes (interval, timeout, unhealthy = healthy threshold).
    health_check_interval_s: int
    health_check_timeout_s: int
    health_check_threshold: int
    #: How long after a pod starts terminating the NLB may still send it new connections: the
    #: gatekeeper keeps accepting that long before it quits.
    accept_s: int
    #: The longest a reply may run (the plan's reply timeout): vLLM's preStop waits at most this
    #: for the requests in flight.
    reply_s: int
    #: vLLM idle this long before it may stop.
    settle_s: int
    #: The NLB's `deregistration_delay.timeout_seconds`: a node that leaves the target group is
    #: given the same window as a pod that leaves the Service.
    deregistration_delay_s: int
    #: How long the NLB keeps the connections of a node that turned unhealthy (`target_health_
    #: state.unhealthy.draining_interval_seconds`): the last connection accepted runs a reply.
    unhealthy_draining_s: int
    #: The pods' `terminationGracePeriodSeconds`: every preStop ends within it.
    grace_s: int


def engine_pre_stop(
    drain: DrainSpec,
    role: str,
    engine_port: int,
    leader_port: int,
    door_port: int | None,
    leader_env: str = "LWS_LEADER_ADDRESS",
    ready_port: int | None = None,
) -> list[str]:
    """The engine container's preStop argv (`programs/drain.py`, from the group's programs
    ConfigMap). A leader waits for its gatekeeper to stop accepting and for its engine to be
    idle; a worker waits while its leader's engine holds `leader_port` (the group's master port,
    open as long as rank 0's engine runs). Behind an elastic stack's door (no gatekeeper in the
    pod) the leader waits the load balancer's `accept_s` before its idle check: the door's pooled
    connections, which kube-proxy keeps on a leaving leader, move off it within that window
    (`gatekeeper_conf.UPSTREAM_LIFETIME_S`). A leader the load balancer reaches itself
    (`door_port` None: `frontDoor: vllm-key`) only keeps accepting through `accept_s`: pooled
    clients would keep an engine busy past any idle wait, so the SIGTERM after it starts vLLM's
    own drain (`--shutdown-timeout`, the longest reply). With `ready_port` (behind a door, where
    the pod's readiness is its check process's /ready) the leader first fails its readiness, so
    a last leader too leaves the Service and its streams end before the SIGTERM."""
    if role == "leader" and door_port is None:
        return ["sleep", str(drain.accept_s)]
    args = [
        f"role={role}",
        f"accept-s={drain.accept_s}",
        f"reply-s={drain.reply_s}",
        f"settle-s={drain.settle_s}",
        f"end-s={hooks_end(drain) - POLL_ROUND_S}",
    ]
    if role == "leader":
        args += [f"engine-port={engine_port}", f"door-port={door_port}"]
        args += [f"ready-port={ready_port}"] if ready_port else []
    else:
        args += [f"leader-env={leader_env}", f"leader-port={leader_port}"]
    return ["python3", f"{programs.MOUNT}/drain.py", *args]


def lifecycle(command: list[str]) -> dict[str, Any]:
    return {"preStop": {"exec": {"command": command}}}
