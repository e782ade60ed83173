"""KEDA's ScaledObject for the LeaderWorkerSet, and the Service it reads the leaders' queue from.

One replica of a LeaderWorkerSet is one whole group: its scale subresource counts leader pods
only (`.status.hpaPodSelector`; kubernetes-sigs/lws api/leaderworkerset/v1/
leaderworkerset_types.go, `+kubebuilder:subresource:scale:specpath=.spec.replicas,
statuspath=.status.replicas,selectorpath=.status.hpaPodSelector`, v0.10.0), so the HPA KEDA
makes adds and removes groups.

The metric path: KEDA's `metrics-api` scaler reads every leader's Prometheus text directly
(`aggregateFromKubeServiceEndpoints`, summed over the Service's endpoints; `format: prometheus`,
`valueLocation` a metric selector; keda-docs content/docs/2.20/scalers/metrics-api.md and
kedacore/keda pkg/scalers/metrics_api_scaler.go `getValueFromPrometheusResponse`, read
2026-12-02). No Prometheus server to run and keep up, and the lag is one poll plus one HPA sync
(`infra.plan.elastic`, 30 s), against a wake-up of minutes. The CloudWatch metrics the collector
already ships were the other choice: a one-minute scrape, EMF ingestion and CloudWatch's
one-minute periods put them minutes behind, and every poll is a billed GetMetricData call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.manifests import gatekeeper
from components.manifests.spec import (
    LWS_API,
    LWS_NAME_LABEL,
    LWS_WORKER_INDEX_LABEL,
    Manifest,
    ServerSpec,
    object_meta,
)

KEDA_API = "keda.sh/v1alpha1"
#: The series the queue trigger reads: requests vLLM holds waiting for a slot.
QUEUE_METRIC = "vllm:num_requests_waiting"
#: KEDA's operator pods (chart 2.20.2 templates/manager/deployment.yaml, `app:
#: {{ .Values.operator.name }}`), the ones that poll the leaders.
KEDA_OPERATOR_LABELS = {"app": "keda-operator"}
#: KEDA's namespace (the chart's release namespace).
KEDA_NAMESPACE = "keda"


@dataclass(frozen=True)
class ScalerSpec:
    """What the ScaledObject says, from the plan's scaling parameters."""

    min_groups: int
    max_groups: int
    #: Waiting requests per group that ask for another one.
    queue_per_group: int
    polling_s: int
    #: The queue trigger's HTTP deadline per leader, above the leaders' own `/metrics` bound.
    metrics_timeout_s: int
    cooldown_s: int
    up_window_s: int
    down_window_s: int
    #: The office-hours window: IANA zone, start and end cron expressions, groups inside.
    schedule: tuple[str, str, str, int] | None = None


def metrics_port(spec: ServerSpec) -> int:
    """Where a leader's `/metrics` is: the gatekeeper's metrics listener, or, behind an elastic
    stack's door (no gatekeeper in the group, `components.manifests.door`), vLLM's own port."""
    return spec.port if spec.door else gatekeeper.METRICS_PORT


def metrics_service_name(spec: ServerSpec) -> str:
    return f"{spec.name}-leader-metrics"


def metrics_service(spec: ServerSpec) -> Manifest:
    """A ClusterIP Service over the leaders' metrics listener (the gatekeeper's, which passes
    vLLM's `/metrics` only); KEDA lists its endpoints and sums what each leader reports."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(spec, metrics_service_name(spec), "leader-metrics"),
        "spec": {
            "type": "ClusterIP",
            "selector": {LWS_NAME_LABEL: spec.lws_name, LWS_WORKER_INDEX_LABEL: "0"},
            "ports": [
                {
                    "name": gatekeeper.METRICS_PORT_NAME,
                    "port": metrics_port(spec),
                    "targetPort": metrics_port(spec),
                    "protocol": "TCP",
                }
            ],
        },
    }


def keda_peer(namespace: str = KEDA_NAMESPACE) -> dict[str, Any]:
    """The NetworkPolicy peer that is KEDA's operator (it polls the metrics port)."""
    return {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "podSelector": {"matchLabels": dict(KEDA_OPERATOR_LABELS)},
    }


def queue_trigger(spec: ServerSpec, scaler: ScalerSpec) -> dict[str, Any]:
    """Another group per `queue_per_group` requests waiting, summed over the leaders."""
    url = (
        f"http://{metrics_service_name(spec)}.{spec.namespace}.svc.cluster.local:"
        f"{metrics_port(spec)}/metrics"
    )
    return {
        "type": "metrics-api",
        "name": "queue",
        "metricType": "AverageValue",
        "metadata": {
            "url": url,
            "format": "prometheus",
            "valueLocation": QUEUE_METRIC,
            "aggregateFromKubeServiceEndpoints": "true",
            "aggregationType": "sum",
            "targetValue": str(scaler.queue_per_group),
            # A Go duration; without it the operator's global 3 s applies (`infra.plan.elastic`).
            "timeout": f"{scaler.metrics_timeout_s}s",
        },
    }


def cron_trigger(scaler: ScalerSpec) -> dict[str, Any] | None:
    """The office-hours floor: `groups_inside` groups between start and end."""
    if scaler.schedule is None:
        return None
    zone, start, end, inside = scaler.schedule
    return {
        "type": "cron",
        "name": "office-hours",
        "metadata": {
            "timezone": zone,
            "start": start,
            "end": end,
            "desiredReplicas": str(inside),
        },
    }


def scaled_object(
    spec: ServerSpec, scaler: ScalerSpec, extra_triggers: Sequence[dict[str, Any]] = ()
) -> Manifest:
    """The ScaledObject on the LeaderWorkerSet: the queue and the schedule, plus
    `extra_triggers` (the door's wake signal). The scale-down window and the cooldown are at
    least a planned wake-up, so a group is not started and dropped within one start-up."""
    triggers = [queue_trigger(spec, scaler)]
    cron = cron_trigger(scaler)
    if cron is not None:
        triggers.append(cron)
    triggers += list(extra_triggers)
    policy = {"type": "Pods", "value": 1, "periodSeconds": 60}
    return {
        "apiVersion": KEDA_API,
        "kind": "ScaledObject",
        "metadata": object_meta(spec, f"{spec.name}-groups", "autoscaler"),
        "spec": {
            "scaleTargetRef": {
                "apiVersion": LWS_API,
                "kind": "LeaderWorkerSet",
                "name": spec.lws_name,
            },
            "minReplicaCount": scaler.min_groups,
            "maxReplicaCount": scaler.max_groups,
            "pollingInterval": scaler.polling_s,
            "cooldownPeriod": scaler.cooldown_s,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {
                        "scaleUp": {"stabilizationWindowSeconds": scaler.up_window_s},
                        # One group at a time: each costs a wake-up to get back.
                        "scaleDown": {
                            "stabilizationWindowSeconds": scaler.down_window_s,
                            "policies": [policy],
                        },
                    }
                }
            },
            "triggers": triggers,
        },
    }
