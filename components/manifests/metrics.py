"""The metrics collector: one small ADOT collector pod that scrapes every leader's gatekeeper
metrics listener and writes what the dashboard and alarms use to CloudWatch as embedded metric
format (EMF) log events, which CloudWatch turns into metrics.

Why this collector, not the add-on's CloudWatch agent or Amazon Managed Prometheus:

- The add-on's agent runs with `hostNetwork: true` (aws-observability/helm-charts,
  charts/amazon-cloudwatch-observability/templates/linux/cloudwatch-agent-custom-resource.yaml),
  so its scrapes come from the node's address: a NetworkPolicy cannot tell it from anything else
  on the node (the VPC CNI's policy agent admits the node's own address to every pod,
  aws/aws-network-policy-agent#65). A pod on the pod network has labels a policy can name.
- The agent's Prometheus pipeline keeps gauges, counters and summaries and drops histograms
  (aws/amazon-cloudwatch-agent plugins/inputs/prometheus/metrics_filter.go: "Only Gauge, Counter
  and Summary are supported"): no time to first token at all.
- Managed Prometheus would need a workspace, per-sample ingestion and a second place to look
  (Grafana); CloudWatch already holds the logs, and its dashboards and alarms are created by
  the stack. One collector pod (`REQUESTS`) fits the nodes' last free memory; a Prometheus
  server with its storage would not.

What is exported, and how: every series the dashboard and alarms use is renamed with the
`RAW_SUFFIX` in the scrape's `metric_relabel_configs`. The renamed series has no `# TYPE`
metadata, so the collector's Prometheus receiver takes it as an untyped gauge
(receiver/prometheusreceiver internal/metadata.go `metadataForMetric`: unknown metadata gives
`MetricTypeUnknown`, mapped to a gauge), and the EMF exporter writes the scraped value as is.
That keeps a histogram's buckets: the EMF exporter would otherwise fold a histogram into
count, sum, min and max (exporter/awsemfexporter datapoint.go), losing the percentiles. Counters
and buckets arrive cumulative; the dashboard takes their per-minute increase with metric math.

A second scrape job reads each leader's own record (`components.manifests.programs.liveness`
`GAUGES`: the step its startup probe measured, the stall bound it took, whether vLLM fell
back to torch's linear) from the same metrics listener at `/metrics/self`
(`gatekeeper_conf.SELF_METRICS_ROUTE`). The receiver takes Prometheus's own `scrape_configs`
as they are (opentelemetry-collector-contrib receiver/prometheusreceiver/README.md, "Getting
Started"; the receiver ADOT v0.45.1 builds in), where each job's `job_name` is unique and
`metrics_path` names the path scraped, `/metrics` by default (prometheus docs
docs/configuration/configuration.md, `<scrape_config>`; config/config.go refuses a second
job of one name). These series are per leader: their dimensions are the stack and the LWS
group index (`group`), so the dashboard draws one line a leader. Behind an elastic stack's
door the group has no gatekeeper to serve the record, and the job is left out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from components.manifests import gatekeeper, images
from components.manifests.identity import COLLECTOR_NAME
from components.manifests.spec import (
    LWS_NAME_LABEL,
    LWS_WORKER_INDEX_LABEL,
    Manifest,
)

#: AWS Distro for OpenTelemetry collector v0.45.1 (aws-otel-collector VERSION, read 2026-11-30),
#: pinned by the digest of its multi-arch index in `images.json` (its source there; `make
#: pin-images`), tag kept for readers. No public source gave the digest of the public.ecr.aws
#: copy, so Docker Hub's is used.
IMAGE = images.reference("metrics-collector")
NAME = COLLECTOR_NAME
#: The labels the NetworkPolicy admits the metrics port from (with the namespace's name label).
LABELS = {
    "app.kubernetes.io/name": "gemma-graviton-metrics",
    "app.kubernetes.io/component": NAME,
    "app.kubernetes.io/part-of": "gemma-graviton",
}
#: Every namespace carries its own name under this label (Kubernetes 1.22+).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
SCRAPE_INTERVAL_SECONDS = 60
#: Appended to every exported series name (see the module docstring).
RAW_SUFFIX = "_raw"
#: The CloudWatch dimension that names the stack.
STACK_DIMENSION = "Stack"
#: The label (and, for the leaders' own records, the CloudWatch dimension) of LWS's group index.
GROUP_DIMENSION = "group"
#: Requests equal limits. The collector scrapes a few hundred series a minute from one or a few
#: leaders; ADOT's own guidance starts far higher for cluster-wide scraping.
MILLICPU = 50
MEMORY_MIB = 160
CONFIG_FILE = "collector.yaml"
CONFIG_MOUNT = "/etc/collector"


@dataclass(frozen=True)
class CollectorSpec:
    """What the collector's objects are built from."""

    #: Namespace of the model server; the collector runs beside it.
    namespace: str
    #: The LeaderWorkerSet whose leaders are scraped.
    lws_name: str
    #: CloudWatch namespace of the exported metrics.
    cloudwatch_namespace: str
    #: Value of the `Stack` dimension.
    stack: str
    region: str
    #: Log group the EMF events go to (the program creates it, with retention).
    log_group: str
    #: vLLM sample names to export (`x_total`, `x_bucket`, gauges), without the suffix.
    samples: Sequence[str]
    #: Samples exported per histogram bucket (`le` becomes a dimension).
    bucket_samples: Sequence[str]
    node_selector: Mapping[str, str]
    #: Tolerations of those nodes' taints (the stack's model nodes in a cluster it does not
    #: own, `spec.stack_taint`).
    tolerations: Sequence[Mapping[str, str]] = ()
    #: Each leader's own record to export per group (`programs.liveness.GAUGES` names), scraped
    #: from its gatekeeper at `gatekeeper_conf.SELF_METRICS_ROUTE`; none behind a door.
    self_samples: Sequence[str] = ()
    #: Behind an elastic stack's door, vLLM's own port on the leaders: their engine container
    #: declares no port (the policy pack refuses one), so no target carries the `metrics` port
    #: name and the leaders are scraped by container and address instead. None: the
    #: gatekeeper's named metrics port.
    engine_port: int | None = None

    @property
    def name(self) -> str:
        return NAME


#: Prometheus's pod label meta name for LWS's group index (non-alphanumerics become `_`).
_GROUP_INDEX_META = "__meta_kubernetes_pod_label_leaderworkerset_sigs_k8s_io_group_index"


def exported_name(sample: str) -> str:
    """The CloudWatch metric name of a scraped vLLM sample."""
    return sample + RAW_SUFFIX


def _alternation(names: Sequence[str]) -> str:
    # Relabel regexes are anchored; `:` and `_` need no escaping.
    return "|".join(sorted(set(names)))


def _target_rules(spec: CollectorSpec) -> list[dict[str, Any]]:
    """Which of a leader's discovered targets is scraped. The pod role makes one target per
    declared container port, and one without a port (the pod's address) for a container that
    declares none (prometheus discovery/kubernetes/pod.go `buildPod`). In the group: the
    gatekeeper's `metrics` port. Behind a door: the engine container's portless target, with
    vLLM's port put on the pod's address, of a Ready leader only (`__meta_kubernetes_pod_ready`,
    the pod's Ready condition, same file): a leader scraped is one the door's Service may send
    to, the signal the elastic alarms read (`components.watch`)."""
    if spec.engine_port is None:
        return [
            {
                "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                "action": "keep",
                "regex": gatekeeper.METRICS_PORT_NAME,
            }
        ]
    return [
        {"source_labels": ["__meta_kubernetes_pod_ready"], "action": "keep", "regex": "true"},
        {
            "source_labels": [
                "__meta_kubernetes_pod_container_name",
                "__meta_kubernetes_pod_container_init",
            ],
            "action": "keep",
            "regex": "vllm;false",
        },
        {
            "source_labels": ["__meta_kubernetes_pod_ip"],
            "regex": "(.+)",
            "target_label": "__address__",
            # `$$` is a literal `$` in the collector's config (`$` starts an env reference).
            "replacement": f"$${{1}}:{spec.engine_port}",
        },
    ]


def _renamed(names: Sequence[str]) -> list[dict[str, Any]]:
    """Keep `names` only, each renamed with the `RAW_SUFFIX` (see the module docstring)."""
    return [
        {"source_labels": ["__name__"], "action": "keep", "regex": _alternation(names)},
        {
            "source_labels": ["__name__"],
            "regex": "(.+)",
            "target_label": "__name__",
            # `$$` is a literal `$` in the collector's config (`$` starts an env reference).
            "replacement": "$${1}" + RAW_SUFFIX,
        },
    ]


def _scrape(
    spec: CollectorSpec, job: str, path: str, names: Sequence[str], sample_limit: int
) -> dict[str, Any]:
    """One scrape job over every leader of the group set: `path` on each, `names` kept."""
    return {
        "job_name": job,
        "scrape_interval": f"{SCRAPE_INTERVAL_SECONDS}s",
        "scrape_timeout": "10s",
        "metrics_path": path,
        "sample_limit": sample_limit,
        "kubernetes_sd_configs": [
            {
                "role": "pod",
                "namespaces": {"names": [spec.namespace]},
                "selectors": [
                    {
                        "role": "pod",
                        "label": f"{LWS_NAME_LABEL}={spec.lws_name},{LWS_WORKER_INDEX_LABEL}=0",
                    }
                ],
            }
        ],
        "relabel_configs": [
            *_target_rules(spec),
            {"target_label": STACK_DIMENSION, "replacement": spec.stack},
            {
                "source_labels": [_GROUP_INDEX_META],
                "target_label": GROUP_DIMENSION,
            },
        ],
        "metric_relabel_configs": _renamed(names),
    }


def _selectors(names: Sequence[str]) -> list[str]:
    return [f"^{exported_name(s)}$" for s in sorted(set(names))]


def collector_config(spec: CollectorSpec) -> str:
    """The ADOT collector's config: scrape the leaders' metrics port, export EMF."""
    every = [*spec.samples, *spec.bucket_samples]
    scrapes = [_scrape(spec, "vllm-leaders", "/metrics", every, 5000)]
    declarations: list[dict[str, Any]] = [
        {"dimensions": [[STACK_DIMENSION]], "metric_name_selectors": _selectors(spec.samples)},
        {
            "dimensions": [[STACK_DIMENSION, "le"]],
            "metric_name_selectors": _selectors(spec.bucket_samples),
        },
    ]
    if spec.self_samples and spec.engine_port is None:
        scrapes.append(
            _scrape(
                spec,
                "leader-records",
                gatekeeper.SELF_METRICS_ROUTE,
                spec.self_samples,
                # The record is a few gauges; anything larger is not the probe's file.
                sample_limit=50,
            )
        )
        declarations.append(
            {
                "dimensions": [[STACK_DIMENSION, GROUP_DIMENSION]],
                "metric_name_selectors": _selectors(spec.self_samples),
            }
        )
    config: dict[str, Any] = {
        "receivers": {"prometheus": {"config": {"scrape_configs": scrapes}}},
        "processors": {
            "memory_limiter": {
                "check_interval": "5s",
                "limit_mib": MEMORY_MIB * 3 // 4,
                "spike_limit_mib": MEMORY_MIB // 5,
            },
            "batch/metrics": {"timeout": "60s"},
        },
        "exporters": {
            "awsemf": {
                "namespace": spec.cloudwatch_namespace,
                "region": spec.region,
                "log_group_name": spec.log_group,
                "log_stream_name": "vllm-leaders",
                "dimension_rollup_option": "NoDimensionRollup",
                "metric_declarations": declarations,
            }
        },
        "service": {
            "pipelines": {
                "metrics": {
                    "receivers": ["prometheus"],
                    "processors": ["memory_limiter", "batch/metrics"],
                    "exporters": ["awsemf"],
                }
            }
        },
    }
    return yaml.safe_dump(config, sort_keys=False, width=200)


def _meta(spec: CollectorSpec, name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": spec.namespace, "labels": dict(LABELS), **extra}


def service_account(spec: CollectorSpec) -> Manifest:
    """The collector's identity. EKS Pod Identity maps it to its IAM role, which may write EMF
    logs (`components.stack_roles`); the account itself carries no role (no IRSA annotation,
    which would send the SDK to a web identity no provider vouches for)."""
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(spec, spec.name)}


def role(spec: CollectorSpec) -> Manifest:
    """Read-only pod discovery in the model's namespace, nothing else."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta(spec, spec.name),
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
    }


def role_binding(spec: CollectorSpec) -> Manifest:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(spec, spec.name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": spec.name},
        "subjects": [{"kind": "ServiceAccount", "name": spec.name, "namespace": spec.namespace}],
    }


#: The pod-template annotation holding the digest of the collector's config.
CONFIG_ANNOTATION = "gemma-graviton.dev/collector-config-sha256"


def config_digest(config: str) -> str:
    """A short digest of the collector's config, for the pod template."""
    return hashlib.sha256(config.encode("utf-8")).hexdigest()[:16]


def config_map(spec: CollectorSpec) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(spec, spec.name),
        "data": {CONFIG_FILE: collector_config(spec)},
    }


def deployment(spec: CollectorSpec) -> Manifest:
    """One collector replica on the pod network (its labels are what the policy admits)."""
    amount = {"cpu": f"{MILLICPU}m", "memory": f"{MEMORY_MIB}Mi"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(spec, spec.name),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(LABELS)},
            # One scraper at a time: two would write every data point twice.
            "strategy": {"type": "Recreate"},
            "template": {
                # The collector reads its config only when it starts, and a ConfigMap edit does
                # not restart it: the config's digest in the template rolls the pod when the
                # config changes.
                "metadata": {
                    "labels": dict(LABELS),
                    "annotations": {CONFIG_ANNOTATION: config_digest(collector_config(spec))},
                },
                "spec": {
                    "serviceAccountName": spec.name,
                    "nodeSelector": dict(spec.node_selector),
                    **(
                        {"tolerations": [dict(t) for t in spec.tolerations]}
                        if spec.tolerations
                        else {}
                    ),
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 10001,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "collector",
                            "image": IMAGE,
                            "imagePullPolicy": "IfNotPresent",
                            "args": [f"--config={CONFIG_MOUNT}/{CONFIG_FILE}"],
                            "resources": {"requests": dict(amount), "limits": dict(amount)},
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": [
                                {"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True}
                            ],
                        }
                    ],
                    "volumes": [{"name": "config", "configMap": {"name": spec.name}}],
                },
            },
        },
    }


def collector_objects(spec: CollectorSpec) -> list[Manifest]:
    """Every object of the collector, in apply order."""
    return [build(spec) for build in (service_account, role, role_binding, config_map, deployment)]


def scraper_peer(namespace: str) -> dict[str, Any]:
    """The NetworkPolicy peer that is the collector: its namespace and its pods' labels."""
    return {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
        "podSelector": {"matchLabels": dict(LABELS)},
    }
