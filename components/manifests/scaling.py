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

The queue floor: with `aggregateFromKubeServiceEndpoints` the trigger asks the Service's ready
endpoints only, and with none it errors ("no endpoints URLs were given for the service name",
kedacore/keda v2.20.2 pkg/scalers/metrics_api_scaler.go `getMetricValue`). A ScaledObject with a
failing trigger and no active one is never scaled to zero: `RequestScale` only sets Ready=False
(pkg/scaling/executor/scale_scaledobjects.go, the `isError && Fallback == nil` case, before the
scale-to-zero case), and a `fallback` needs replicas above 0 (the same switch, and
pkg/fallback/fallback.go). So a group whose leader never turns Ready (no capacity for its second
node, a crash loop, an image that cannot be pulled) would keep its nodes for ever. The floor is two
tiny always-on nginx pods on the system nodes that the same Service selects (`QUEUE_SOURCE_LABEL`,
on the leaders too) and that answer `/metrics` with a queue of 0 (`FLOOR_BODY`), spread over the
nodes and kept by a disruption budget through a drain (`floor_disruption_budget`): the Service
always has a ready endpoint, the trigger never errors for want of one, and the sum
(`aggregationType: sum`) is the ready leaders' queue plus 0. An endpoint that fails is left out of
the sum unless every one fails (`aggregateMetricsFromMultipleEndpoints`), so a leader that does not
answer in time counts as no queue, as a leader that is not Ready does.

The bound: with no trigger active, KEDA scales the LeaderWorkerSet to 0 at the first poll after
`LastActiveTime + cooldownPeriod` (`scaleToZeroOrIdle`; `LastActiveTime` is stamped at every poll
with a trigger active, `RequestScale`), and polls come every `pollingInterval`: zero groups at
most `cooldownPeriod + pollingInterval` after the last active poll (`ScalerSpec.to_zero_s`).
Outside the schedule, the last active poll is the last with a request waiting or served on a
leader (`hold_trigger`) or the door's wake flag up (a keyed request in the last `signal_seconds`;
`components.manifests.asleep`). With no leader Ready, only the flag: clients that keep asking keep
one group trying, and the idle-nodes alarm (`components.watch`) says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.manifests import gatekeeper
from components.manifests.spec import (
    LWS_API,
    QUEUE_SOURCE_LABEL,
    Manifest,
    ServerSpec,
    object_labels,
    object_meta,
    pod_security_context,
)

KEDA_API = "keda.sh/v1alpha1"
#: The series the queue trigger reads: requests vLLM holds waiting for a slot.
QUEUE_METRIC = "vllm:num_requests_waiting"
#: vLLM's gauge of the requests a leader is serving (the hold trigger's).
RUNNING_METRIC = "vllm:num_requests_running"
#: KEDA's operator pods (chart 2.20.2 templates/manager/deployment.yaml, `app:
#: {{ .Values.operator.name }}`), the ones that poll the leaders.
KEDA_OPERATOR_LABELS = {"app": "keda-operator"}
#: KEDA's namespace (the chart's release namespace).
KEDA_NAMESPACE = "keda"
#: The queue floor's answer to the trigger: the queue series at 0, in Prometheus' text format
#: (what `getValueFromPrometheusResponse` parses with prometheus/common expfmt's TextParser;
#: KEDA v2.20.2 takes the first sample of the family named by `valueLocation`, gauge or
#: untyped). The trigger reads this one series and nothing else.
FLOOR_BODY = "".join(f"# TYPE {m} gauge\n{m} 0\n" for m in (QUEUE_METRIC, RUNNING_METRIC))
#: The floor's requests, equal to its limits: one nginx worker answering a fixed string to one
#: poller every `pollingInterval`. The planner counts them on the system nodes
#: (`infra.plan.elastic.SYSTEM_PODS`).
FLOOR_MILLICPU = 10
FLOOR_MEMORY_MIB = 16
#: Two floor pods, spread over the system nodes where the scheduler can, and a budget that
#: lets a drain take one at a time (`floor_disruption_budget`): a node drain or an upgrade never
#: leaves the metrics Service without the endpoint the trigger needs while no leader is Ready.
#: Both answer 0, so the sum is unchanged.
FLOOR_REPLICAS = 2
#: The node label the kubelet sets to the node's name (kubernetes v1.35
#: staging/src/k8s.io/api/core/v1/well_known_labels.go `LabelHostname`).
HOSTNAME_LABEL = "kubernetes.io/hostname"
FLOOR_CONFIG_FILE = "nginx.conf"
FLOOR_CONFIG_MOUNT = "/etc/queue-floor"
FLOOR_RUN_DIR = "/tmp"


#: How long KEDA waits for one leader's `/metrics` (the queue trigger's `timeout`). The trigger
#: metadata's `timeout` replaces the operator's global HTTP timeout (kedacore/keda v2.20.2
#: pkg/scalers/metrics_api_scaler.go `NewMetricsAPIScaler`: `config.GlobalHTTPTimeout` unless
#: `meta.Timeout > 0`), which is `KEDA_HTTP_DEFAULT_TIMEOUT`, 3000 ms unless set
#: (cmd/operator/main.go, the same tag). A busy leader's `/metrics` is allowed 5 s
#: (`ProbeSpec.request_s`, the same deadline the drain's preStop read gives it), so 3 s fails the
#: trigger exactly when the queue grows. The safe end is the long one: twice the leaders' bound,
#: and still shorter than a poll, so one slow poll ends before the next (`infra.plan.elastic`
#: checks both).
METRICS_TIMEOUT_SECONDS = 10
#: Minutes in a day: a window's end at 00:00 is the next midnight.
DAY_MINUTES = 24 * 60


@dataclass(frozen=True)
class CronWindow:
    """The schedule's window: on `weekdays` from `start` to `end` (HH:MM in the IANA zone
    `time_zone`; an end at 00:00 is midnight) `groups_inside` groups, else `groups_outside`
    (the fewest). KEDA's cron trigger takes it as cron expressions (`crons`)."""

    time_zone: str
    #: ISO weekdays, Monday = 0.
    weekdays: tuple[int, ...]
    start: str
    end: str
    groups_inside: int
    groups_outside: int
    hours_a_week: float

    def crons(self) -> tuple[str, str]:
        """Start and end as cron expressions (minute hour * * day-of-week, Sunday = 0)."""
        (h0, m0), (h1, m1) = (map(int, t.split(":")) for t in (self.start, self.end))
        start, end = h0 * 60 + m0, (h1 * 60 + m1) or DAY_MINUTES
        # An end at midnight falls on the next day: its cron names the days after the window's.
        # KEDA holds the window while the next end comes before the next start (kedacore/keda
        # pkg/scalers/cron_scaler.go `GetMetricsAndActivity`), so Mon 08:00 to Tue 00:00 holds.
        days, end_days = (
            ",".join(str((d + 1 + shift) % 7) for d in self.weekdays)
            for shift in (0, end // DAY_MINUTES)
        )
        return (
            f"{start % 60} {start // 60} * * {days}",
            f"{end % 60} {end // 60 % 24} * * {end_days}",
        )


@dataclass(frozen=True)
class ScalerSpec:
    """What KEDA and the HPA are configured with, as the planner sizes it: the ScaledObject is
    built from it, the plan prints it and the scaling simulation replays load through it."""

    min_groups: int
    max_groups: int
    #: Waiting requests per running group that ask for another group (the trigger's target).
    queue_per_group: int
    #: The hold trigger's target: one group's max_num_seqs, more than the door ever lets reach
    #: vLLM at once, so it holds one group while anything is served and never asks for more.
    running_per_group: int
    #: The HPA's tolerance around a ratio of 1.
    tolerance: float
    #: Scale-up and scale-down stabilisation windows (seconds).
    up_window_s: int
    down_window_s: int
    #: KEDA's cooldown before the last group goes (1 -> 0), the same as the down window.
    cooldown_s: int
    polling_s: int
    #: How late the autoscaler sees a queue: a poll plus an HPA sync (seconds).
    metric_lag_s: int
    #: Planned wake-up of one group from zero nodes (seconds), with this stack's model cache.
    cold_start_s: int
    nodes_per_group: int
    #: The office-hours window; None: the queue alone.
    schedule: CronWindow | None

    @property
    def to_zero_s(self) -> int:
        """The most time from the last poll with a trigger active to zero groups (a stack with
        `minGroups` 0): the cooldown, then at most one polling interval to the poll that acts
        (see the module doc)."""
        return self.cooldown_s + self.polling_s


def metrics_port(spec: ServerSpec) -> int:
    """Where a leader's `/metrics` is: the gatekeeper's metrics listener, or, behind an elastic
    stack's door (no gatekeeper in the group, `components.manifests.door`), vLLM's own port."""
    return spec.port if spec.door else gatekeeper.METRICS_PORT


def metrics_service_name(spec: ServerSpec) -> str:
    return f"{spec.name}-leader-metrics"


def queue_sources(spec: ServerSpec) -> dict[str, str]:
    """The pods whose `/metrics` the queue trigger sums: this server's leaders and its floor."""
    return {"app.kubernetes.io/name": spec.name, QUEUE_SOURCE_LABEL: "true"}


def metrics_service(spec: ServerSpec) -> Manifest:
    """A ClusterIP Service over the leaders' metrics listener and the queue floor's; KEDA lists
    its ready endpoints and sums what each reports (the floor always 0)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(spec, metrics_service_name(spec), "leader-metrics"),
        "spec": {
            "type": "ClusterIP",
            "selector": queue_sources(spec),
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


def _leaders_trigger(spec: ServerSpec, name: str, metric: str, target: int) -> dict[str, Any]:
    """A `metrics-api` trigger on `metric` summed over the leaders (and the floor's 0)."""
    url = (
        f"http://{metrics_service_name(spec)}.{spec.namespace}.svc.cluster.local:"
        f"{metrics_port(spec)}/metrics"
    )
    return {
        "type": "metrics-api",
        "name": name,
        "metricType": "AverageValue",
        "metadata": {
            "url": url,
            "format": "prometheus",
            "valueLocation": metric,
            "aggregateFromKubeServiceEndpoints": "true",
            "aggregationType": "sum",
            "targetValue": str(target),
            # A Go duration; without it the operator's global 3 s applies.
            "timeout": f"{METRICS_TIMEOUT_SECONDS}s",
        },
    }


def queue_trigger(spec: ServerSpec, scaler: ScalerSpec) -> dict[str, Any]:
    """Another group per `queue_per_group` requests waiting, summed over the leaders."""
    return _leaders_trigger(spec, "queue", QUEUE_METRIC, scaler.queue_per_group)


def hold_trigger(spec: ServerSpec, scaler: ScalerSpec) -> dict[str, Any]:
    """Active while any leader serves a request. A request being served counts as running, not
    waiting, so without it the last active poll outside the schedule is the wake flag's last
    (a keyed request's `signal_seconds`), and KEDA scales the group to zero `to_zero_s` after a
    request began however long its reply runs (kedacore/keda v2.20.2 pkg/scaling/executor/
    scale_scaledobjects.go: `LastActiveTime` is stamped only at polls with a trigger active,
    and a metrics-api trigger is active while its value is above 0): the stream ends in the
    drain and the next request waits a cold start. Its target is one group's `max_num_seqs`,
    above what the door lets reach vLLM in all, so ceil(running / target) is 1 while anything is
    served: it keeps a group from zero, not more groups (the queue trigger scales those)."""
    return _leaders_trigger(spec, "running", RUNNING_METRIC, scaler.running_per_group)


def cron_trigger(scaler: ScalerSpec) -> dict[str, Any] | None:
    """The office-hours floor: `groups_inside` groups between start and end."""
    if scaler.schedule is None:
        return None
    window = scaler.schedule
    start, end = window.crons()
    return {
        "type": "cron",
        "name": "office-hours",
        "metadata": {
            "timezone": window.time_zone,
            "start": start,
            "end": end,
            "desiredReplicas": str(window.groups_inside),
        },
    }


def scaled_object(
    spec: ServerSpec, scaler: ScalerSpec, extra_triggers: Sequence[dict[str, Any]] = ()
) -> Manifest:
    """The ScaledObject on the LeaderWorkerSet: the queue, the requests served and the schedule,
    plus `extra_triggers` (the door's wake signal). The scale-down window and the cooldown are at
    least a planned wake-up, so a group is not started and dropped within one start-up."""
    triggers = [queue_trigger(spec, scaler), hold_trigger(spec, scaler)]
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


def leaders_name(spec: ServerSpec) -> str:
    """The Service over the Ready leaders' vLLM port behind a door (`door.leaders_service`)."""
    return f"{spec.name}-leaders"


def leaders_address(spec: ServerSpec) -> str:
    """That Service's host:port in the cluster's DNS."""
    return f"{leaders_name(spec)}.{spec.namespace}.svc.cluster.local:{spec.port}"


def floor_readiness(spec: ServerSpec) -> dict[str, Any]:
    """The floor is Ready only while no leader answers /health through the leaders' Service
    (which has endpoints only for Ready leaders, so with none the connection is refused at
    once). While a leader is Ready the trigger sums the leaders alone, and a leader whose
    /metrics times out makes the trigger err (KEDA v2.20.2 pkg/scalers/metrics_api_scaler.go
    drops a failing endpoint from the sum and errs only when every endpoint fails): the HPA
    holds its count rather than reading a confident 0 and removing groups that serve. busybox
    `wget` is in the nginx Alpine image."""
    return {
        "exec": {
            "command": [
                "/bin/sh",
                "-c",
                f"! wget -q -T 5 -O /dev/null http://{leaders_address(spec)}/health",
            ]
        },
        "periodSeconds": 10,
        "timeoutSeconds": 8,
        "failureThreshold": 1,
        "successThreshold": 1,
    }


def floor_name(spec: ServerSpec) -> str:
    return f"{spec.name}-queue-floor"


def floor_selector(spec: ServerSpec) -> dict[str, str]:
    """The floor's own pods (its Deployment and NetworkPolicy select them)."""
    return {"app.kubernetes.io/name": spec.name, "app.kubernetes.io/component": "queue-floor"}


def floor_nginx_conf(listen: str, run_dir: str = FLOOR_RUN_DIR, user: str | None = None) -> str:
    """The floor's whole nginx config: `GET /metrics` on `listen` answers `FLOOR_BODY`, anything
    else 404. No module and no file but its pid and empty temp directories under `run_dir`, so
    the official image and Debian's nginx run it alike. `user` only for a test run as root."""
    body = FLOOR_BODY.replace("\n", "\\n")
    temp = "\n".join(
        f"    {kind}_temp_path {run_dir}/{kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""# The queue floor (components/manifests/scaling.py): a queue of 0 for KEDA.
{f"user {user};" if user else ""}
# The container's first process: nginx stays in the foreground.
daemon off;
worker_processes 1;
pid {run_dir}/nginx.pid;
events {{
    worker_connections 64;
}}
http {{
    access_log off;
    server_tokens off;
{temp}
    server {{
        listen {listen};
        location = /metrics {{
            default_type "text/plain; version=0.0.4; charset=utf-8";
            return 200 "{body}";
        }}
        location / {{
            return 404;
        }}
    }}
}}
"""


def floor_config_map(spec: ServerSpec) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(spec, floor_name(spec), "queue-floor"),
        "data": {FLOOR_CONFIG_FILE: floor_nginx_conf(str(metrics_port(spec)))},
    }


def floor_deployment(spec: ServerSpec) -> Manifest:
    """`FLOOR_REPLICAS` floor pods on the system nodes (the door's, never the model nodes: they
    must outlive every group), carrying `QUEUE_SOURCE_LABEL` so the metrics Service selects
    them. Each is Ready only while no leader is (`floor_readiness`), since KEDA counts ready
    endpoints only; the config digest rolls them.

    Spread over nodes softly: `whenUnsatisfiable: ScheduleAnyway` makes the constraint a score,
    never a filter (kubernetes v1.35 pkg/scheduler/framework/plugins/podtopologyspread/
    filtering.go keeps `DoNotSchedule` constraints only; scoring.go weighs the rest), so with one
    system node left (the other drained) both pods still run; a hard constraint would leave the
    second Pending there. The system group has two nodes at least (`infra.plan.elastic`)."""
    if spec.door is None:
        raise ValueError(f"{spec.name} has no door: the queue floor is for autoscaled stacks")
    port = metrics_port(spec)
    amount = {"cpu": f"{FLOOR_MILLICPU}m", "memory": f"{FLOOR_MEMORY_MIB}Mi"}
    labels = {**object_labels(spec, "queue-floor"), QUEUE_SOURCE_LABEL: "true"}
    conf = floor_nginx_conf(str(port))
    container = {
        "name": "queue-floor",
        # The gatekeeper's pinned nginx: no second image to pull, patch and pin.
        "image": gatekeeper.IMAGE,
        "imagePullPolicy": "IfNotPresent",
        # Not the image's entrypoint, which rewrites files under /etc/nginx (read-only here).
        "command": ["nginx", "-e", "stderr", "-c", f"{FLOOR_CONFIG_MOUNT}/{FLOOR_CONFIG_FILE}"],
        "ports": [{"name": gatekeeper.METRICS_PORT_NAME, "containerPort": port, "protocol": "TCP"}],
        "resources": {"requests": dict(amount), "limits": dict(amount)},
        "securityContext": gatekeeper.nginx_security_context(),
        "readinessProbe": floor_readiness(spec),
        "livenessProbe": {
            "tcpSocket": {"port": port},
            "periodSeconds": 20,
            "failureThreshold": 3,
            "timeoutSeconds": 2,
        },
        "volumeMounts": [
            {"name": "config", "mountPath": FLOOR_CONFIG_MOUNT, "readOnly": True},
            {"name": "run", "mountPath": FLOOR_RUN_DIR},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        # Done when every pod runs the new template, Ready or not: the floor is not Ready while
        # a leader serves, so pulumi-kubernetes' default Deployment await (every replica
        # available) would time out a deploy in serving hours. The same annotation the
        # LeaderWorkerSet uses (`lws.py`).
        "metadata": object_meta(
            spec,
            floor_name(spec),
            "queue-floor",
            annotations={
                "pulumi.com/waitFor": f"jsonpath={{.status.updatedReplicas}}={FLOOR_REPLICAS}"
            },
        ),
        "spec": {
            "replicas": FLOOR_REPLICAS,
            "selector": {"matchLabels": floor_selector(spec)},
            # One pod at a time. The Deployment controller removes an old pod only while all pods
            # less (replicas - maxUnavailable) less the new set's unavailable ones is above 0
            # (kubernetes v1.35 pkg/controller/deployment/rolling.go `reconcileOldReplicaSets`),
            # and while a leader serves the floor's pods are all unready by design: the surge pod
            # lets one old pod go (3 - 1 - 1), the second new one stops there (3 - 1 - 2 = 0), and
            # the last old pod stays until no leader is Ready, when the floor's pods turn Ready
            # and the rollout ends (`pulumi up` waits for updated pods, not Ready ones, and an
            # old pod answers 0 as a new one does). While no leader is Ready one floor pod is
            # always Ready: the Service is never empty when the triggers need it.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1},
            },
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {gatekeeper.CONFIG_ANNOTATION: gatekeeper.config_digest(conf)},
                },
                "spec": {
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "nodeSelector": dict(spec.door.node_selector),
                    "tolerations": [dict(t) for t in spec.door.tolerations],
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": HOSTNAME_LABEL,
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": {"matchLabels": floor_selector(spec)},
                        }
                    ],
                    "securityContext": pod_security_context(),
                    "terminationGracePeriodSeconds": 5,
                    "containers": [container],
                    "volumes": [
                        {"name": "config", "configMap": {"name": floor_name(spec)}},
                        {"name": "run", "emptyDir": {"sizeLimit": "1Mi"}},
                    ],
                },
            },
        },
    }


def floor_disruption_budget(spec: ServerSpec) -> Manifest:
    """At least one floor pod stays while the floor is what the trigger reads.

    The eviction API (kubernetes v1.35 pkg/registry/core/pod/storage/eviction.go `Create`) lets
    a Ready pod go only while the budget's `disruptionsAllowed` is above 0
    (`checkAndDecrement`), and the disruption controller counts Ready pods only as healthy
    (pkg/controller/disruption/disruption.go `countHealthyPods`, `podutil.IsPodReady`). While no
    leader is Ready both floor pods are Ready: one may be evicted, the second only once the
    replacement is Ready (its first probe, 10 s), so a drain (`kubectl drain`, an EKS node group
    upgrade, the Cluster Autoscaler) never empties the Service.

    `unhealthyPodEvictionPolicy: AlwaysAllow` (GA in Kubernetes 1.31): a pod that is not Ready is
    evicted without the budget (the same `Create`, the `!podutil.IsPodReady(pod)` branch). The
    floor is not Ready whenever a leader is (`floor_readiness`), which is most of the time it
    serves; under the default `IfHealthyBudget` a not-Ready pod may go only while currentHealthy
    >= desiredHealthy, here 0 >= 1, so every drain of a system node would stall while the model
    serves. Then the leaders are the trigger's endpoints, and the floor is not needed. The
    Cluster Autoscaler's own simulation does not follow that policy (kubernetes/autoscaler
    cluster-autoscaler/simulator/pdb/basic.go `CanRemovePods` refuses a pod whose budget allows
    no disruption), so while a leader serves it treats a system node with a floor pod as
    unremovable; the system node group is fixed in size, so it never tries."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": object_meta(spec, floor_name(spec), "disruption-budget"),
        "spec": {
            "minAvailable": 1,
            "selector": {"matchLabels": floor_selector(spec)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def floor_network_policy(spec: ServerSpec) -> Manifest:
    """The floor admits its port from KEDA's operator only (the pods that poll it)."""
    keda = keda_peer(spec.door.keda_namespace if spec.door else KEDA_NAMESPACE)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": object_meta(spec, floor_name(spec), "network-policy"),
        "spec": {
            "podSelector": {"matchLabels": floor_selector(spec)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [keda], "ports": [{"port": metrics_port(spec), "protocol": "TCP"}]}
            ],
        },
    }


def floor_objects(spec: ServerSpec) -> list[Manifest]:
    """The queue floor of an autoscaled stack, in apply order: its config, its policy, its pods,
    their disruption budget."""
    return [
        floor_config_map(spec),
        floor_network_policy(spec),
        floor_deployment(spec),
        floor_disruption_budget(spec),
    ]
