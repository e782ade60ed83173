"""The front door of an elastic stack: the gatekeeper out of the leader pods, as an always-on
Deployment on the system nodes, in front of every group through the leaders' ClusterIP Service.

A stack whose groups may scale to zero cannot keep its front door inside a group: with no group
there would be nothing to answer. So for elastic stacks (`ServerSpec.door`):

- the door runs the same gatekeeper (`gatekeeper.container`, `gatekeeper_conf.nginx_conf`,
  `gatekeeper.js`) with upstream the leaders' Service instead of 127.0.0.1, and the asleep
  answers and wake flag of `components.manifests.asleep`;
- the load balancer's Service selects the door; the leaders' ClusterIP Service reaches vLLM's
  port on the leaders, which listen on the pod network, and the group's NetworkPolicy admits that
  port from the door (and the metrics collector) only;
- KEDA reads the wake flag through a ClusterIP Service on the door's internal port
  (`wake_trigger`), which the door's NetworkPolicy admits from KEDA's namespace only.

Why a door-side flag and not KEDA's HTTP add-on, whose interceptor holds requests through a cold
start: the add-on's interceptor is one more proxy on the request path, with its own timeouts,
in front of a gatekeeper whose limits are planned to the second, and a cold start here is five
to ten minutes, far past what a client should hold a connection for; the door answers at once
with `Retry-After` instead, and the flag is plain nginx that the rehearsal runs for real (the
add-on's interceptor and scaler are Go services the rehearsal could not run).

One door replica: the flag lives in that nginx (KEDA's metrics-api trigger asks one address, and
with two replicas a poll could miss the one that refused the request). Its rollout starts the new
pod before the old one stops (maxUnavailable 0); the old one drains as a leader's gatekeeper does
(readiness fails, the load balancer stops sending, nginx quits gracefully and finishes its
streams within the grace). Its liveness is nginx's own (TCP), never the model's.

A leader's drain behind the door (`components.manifests.drain`): its vLLM preStop finds no local
gatekeeper listening: it keeps serving through the load balancer's window, while the door's pooled
connections move off it, then waits for the engine to be idle. First it fails its readiness
(`programs/liveness.py` /ready): with no other leader serving, kube-proxy sends the door's new
connections to a terminating leader while its readiness passes (KEP-1669), so a last leader that
stayed ready would stay busy to the hooks' end and the SIGTERM would cut its streams (a node drain
of a one-group stack). Out of the Service, its new requests find no leader at the door (its asleep
answer: 503 with Retry-After) and its streams end.

Limits at the door: the per-client ones (rate, burst, requests in flight, connections) stay per
client: they bound what one client may take, and one client's fair share does not grow with the
groups behind the door. The pod-wide one, requests at vLLM from all clients together, is what
the most groups that may run hold (`infra.plan.frontdoor`), so beyond one group's room requests
wait in vLLM, which is what the queue trigger scales on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.manifests import asleep, drain, gatekeeper, metrics, scaling
from components.manifests.asleep import Asleep
from components.manifests.probes import LIVENESS_PORT
from components.manifests.spec import (
    LWS_NAME_LABEL,
    Manifest,
    ServerSpec,
    leaders_selector,
    object_meta,
    pod_security_context,
)


@dataclass(frozen=True)
class DoorSpec:
    """The always-on front door of an elastic stack (`ServerSpec.door`): the gatekeeper out of
    the leader pods, on the system nodes, in front of every group."""

    #: What it answers while no group runs, and its wake flag.
    asleep: Asleep
    #: The most groups that may run (the door's pod-wide grammar limit admits one per group).
    max_groups: int
    #: Labels of the always-on system nodes.
    node_selector: Mapping[str, str]
    #: Tolerations for those nodes' taints.
    tolerations: Sequence[Mapping[str, str]] = ()
    #: Namespace of KEDA's operator, which polls the wake flag.
    keda_namespace: str = "keda"


def _door(spec: ServerSpec) -> DoorSpec:
    if spec.door is None:
        raise ValueError(f"{spec.name} has no door: it is a fixed stack")
    return spec.door


def leader_readiness_probe() -> dict[str, Any]:
    """A leader's readiness behind the door: the check process counts vLLM's failures itself
    (`liveness.READY_FAILURES`) and fails at once once draining: out of the Service within a
    period and the endpoint's propagation, before the pool's last reuse ends inside the window."""
    return {
        "httpGet": {"path": "/ready", "port": LIVENESS_PORT},
        "periodSeconds": drain.READY_PERIOD_S,
        "failureThreshold": 1,
        "timeoutSeconds": 5,
    }


def name(spec: ServerSpec) -> str:
    return f"{spec.name}-door"


def selector(spec: ServerSpec) -> dict[str, str]:
    """The door's pods (the load balancer's Service selects them)."""
    return {"app.kubernetes.io/name": spec.name, "app.kubernetes.io/component": "door"}


def config_where(spec: ServerSpec) -> dict[str, Any]:
    """What `gatekeeper.config_files` takes for the door's nginx.conf: upstream the leaders'
    Service (its ClusterIP never changes while the Service exists, so nginx resolving it once at
    start is enough)."""
    return {"upstream": scaling.leaders_address(spec), "asleep": _door(spec).asleep}


def deployment(
    spec: ServerSpec, config_digest: str, key_fingerprint: str | None = None
) -> Manifest:
    """The door: one gatekeeper pod on the system nodes. The config and key annotations roll it
    when either changes (nginx reads both at start)."""
    door = _door(spec)
    annotations = {gatekeeper.CONFIG_ANNOTATION: config_digest}
    if key_fingerprint is not None:
        annotations[gatekeeper.KEY_ANNOTATION] = key_fingerprint
    labels = {**object_meta(spec, name(spec), "door")["labels"]}
    pod = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "nodeSelector": dict(door.node_selector),
        "tolerations": [dict(t) for t in door.tolerations],
        "securityContext": pod_security_context(),
        # The door drains as a leader's gatekeeper does (`components.manifests.drain`): a
        # rollout or a node drain lets every stream in flight finish.
        "terminationGracePeriodSeconds": spec.drain.grace_s,
        "containers": [
            gatekeeper.container(spec.gatekeeper_millicpu, spec.gatekeeper_memory_mib, spec.drain)
        ],
        "volumes": gatekeeper.volumes(spec.gatekeeper_config_name, spec.api_key_secret_name),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": object_meta(spec, name(spec), "door"),
        "spec": {
            "replicas": 1,  # one replica (see the module doc)
            "selector": {"matchLabels": selector(spec)},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": pod,
            },
        },
    }


def leaders_service(spec: ServerSpec) -> Manifest:
    """The door's upstream: vLLM's port on the ready leaders. With
    no group it has no endpoints, and a connection to it is refused at once."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(spec, scaling.leaders_name(spec), "leaders"),
        "spec": {
            "type": "ClusterIP",
            "selector": leaders_selector(spec),
            "ports": [{"name": "vllm", "port": spec.port, "targetPort": spec.port}],
        },
    }


def wake_service(spec: ServerSpec) -> Manifest:
    """The door's internal port for KEDA: GET /wake (never the load balancer's)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(spec, f"{name(spec)}-wake", "door"),
        "spec": {
            "type": "ClusterIP",
            "selector": selector(spec),
            "ports": [
                {
                    "name": gatekeeper.METRICS_PORT_NAME,
                    "port": gatekeeper.METRICS_PORT,
                    "targetPort": gatekeeper.METRICS_PORT_NAME,
                }
            ],
        },
    }


def wake_trigger(spec: ServerSpec) -> dict[str, Any]:
    """The extra KEDA trigger for the ScaledObject: a `metrics-api` trigger on the door's wake
    flag (keda.sh/docs/2.20/scalers/metrics-api, read 2026-12-02: `url`, `valueLocation` in GJSON,
    `targetValue`, `activationTargetValue`, `format` json). The flag is 0 or 1: above the
    activation value 0, one refused request activates the ScaledObject (KEDA scales from zero
    to one group), and as a metric it asks for ceil(1 / 1) = 1 group, never more; the queue and
    cron triggers ask for the rest."""
    _door(spec)  # a fixed stack has no door to wake
    wake_service_host = f"{name(spec)}-wake.{spec.namespace}.svc.cluster.local"
    return {
        "type": "metrics-api",
        "name": "door-wake",
        "metadata": {
            "url": f"http://{wake_service_host}:{gatekeeper.METRICS_PORT}{asleep.WAKE_PATH}",
            "format": "json",
            "valueLocation": asleep.WAKE_FIELD,
            "targetValue": "1",
            "activationTargetValue": "0",
        },
    }


def network_policy(spec: ServerSpec) -> Manifest:
    """The door admits its listener from anyone (the load balancer keeps the client's address;
    its source ranges are the filter) and its internal port from KEDA's namespace only."""
    namespace = {metrics.NAMESPACE_NAME_LABEL: _door(spec).keda_namespace}
    keda = {"namespaceSelector": {"matchLabels": namespace}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": object_meta(spec, name(spec), "network-policy"),
        "spec": {
            "podSelector": {"matchLabels": selector(spec)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"ports": [{"port": gatekeeper.PORT, "protocol": "TCP"}]},
                {
                    "from": [keda],
                    "ports": [{"port": gatekeeper.METRICS_PORT, "protocol": "TCP"}],
                },
            ],
        },
    }


def group_ingress(spec: ServerSpec) -> list[dict[str, Any]]:
    """What the group's NetworkPolicy admits behind a door: the ranks among themselves, and
    vLLM's port from the door, the metrics collector and KEDA's operator (which reads the
    leaders' queue from vLLM's /metrics) only."""
    group = {"matchLabels": {LWS_NAME_LABEL: spec.lws_name}}
    return [
        {"from": [{"podSelector": group}]},
        {
            "from": [
                {"podSelector": {"matchLabels": selector(spec)}},
                # The queue floor asks the leaders' /health for its own readiness.
                {"podSelector": {"matchLabels": scaling.floor_selector(spec)}},
                metrics.scraper_peer(spec.namespace),
                scaling.keda_peer(_door(spec).keda_namespace),
            ],
            "ports": [{"port": spec.port, "protocol": "TCP"}],
        },
    ]


def objects(spec: ServerSpec, config: str, key_fingerprint: str | None = None) -> list[Manifest]:
    """The door's objects: its NetworkPolicy, the leaders' Service it reaches vLLM through, the
    Service KEDA reads its wake flag from and its Deployment (`config`: the digest of its
    ConfigMap's files, `gatekeeper_map.files`)."""
    return [
        network_policy(spec),
        leaders_service(spec),
        wake_service(spec),
        deployment(spec, config, key_fingerprint),
    ]
