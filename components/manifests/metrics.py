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
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from components.manifests import gatekeeper, images
from components.manifests.spec import LWS_NAME_LABEL, LWS_WORKER_INDEX_LABEL, Manifest

#: AWS Distro for OpenTelemetry collector v0.45.1 (aws-otel-collector VERSION, read 2026-11-30),
#: pinned by the digest of its multi-arch index in `images.json` (its source there; `make
#: pin-images`), tag kept for readers. No public source gave the digest of the public.ecr.aws
#: copy, so Docker Hub's is used.
IMAGE = images.reference("metrics-collector")
NAME = "metrics-collector"
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


def collector_config(spec: CollectorSpec) -> str:
    """The ADOT collector's config: scrape the leaders' metrics port, export EMF."""
    every = [*spec.samples, *spec.bucket_samples]
    scrape = {
        "job_name": "vllm-leaders",
        "scrape_interval": f"{SCRAPE_INTERVAL_SECONDS}s",
        "scrape_timeout": "10s",
        "metrics_path": "/metrics",
        "sample_limit": 5000,
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
                "target_label": "group",
            },
        ],
        "metric_relabel_configs": [
            {"source_labels": ["__name__"], "action": "keep", "regex": _alternation(every)},
            {
                "source_labels": ["__name__"],
                "regex": "(.+)",
                "target_label": "__name__",
                # `$$` is a literal `$` in the collector's config (`$` starts an env reference).
                "replacement": "$${1}" + RAW_SUFFIX,
            },
        ],
    }
    plain = [f"^{exported_name(s)}$" for s in sorted(set(spec.samples))]
    buckets = [f"^{exported_name(s)}$" for s in sorted(set(spec.bucket_samples))]
    config: dict[str, Any] = {
        "receivers": {"prometheus": {"config": {"scrape_configs": [scrape]}}},
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
                "metric_declarations": [
                    {"dimensions": [[STACK_DIMENSION]], "metric_name_selectors": plain},
                    {"dimensions": [[STACK_DIMENSION, "le"]], "metric_name_selectors": buckets},
                ],
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


def service_account(spec: CollectorSpec, role_arn: Any) -> Manifest:
    """The collector's identity; `role_arn` is its IAM role (IRSA), which may write EMF logs."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _meta(spec, spec.name, annotations={"eks.amazonaws.com/role-arn": role_arn}),
    }


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


def collector_objects(spec: CollectorSpec, role_arn: Any) -> list[Manifest]:
    """Every object of the collector, in apply order."""
    return [
        service_account(spec, role_arn),
        role(spec),
        role_binding(spec),
        config_map(spec),
        deployment(spec),
    ]


def scraper_peer(namespace: str) -> dict[str, Any]:
    """The NetworkPolicy peer that is the collector: its namespace and its pods' labels."""
    return {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
        "podSelector": {"matchLabels": dict(LABELS)},
    }
