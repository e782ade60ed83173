"""Logs that outlive a LeaderWorkerSet group recreation: the EKS CloudWatch observability add-on.

LWS deletes a failed group's pods, and their logs with them. The add-on's Fluent Bit ships every
container's output to CloudWatch Logs as it is written, so vLLM's start-up error is still there
after the group is gone. The EKS add-on (rather than a self-managed Fluent Bit chart) keeps the
agent's versions matched to the cluster's and is upgraded with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from components.addons import ClusterRef, addon_with_role
from components.manifests.identity import AGENT_NAMESPACE, AGENT_SERVICE_ACCOUNT

ADDON = "amazon-cloudwatch-observability"
#: The log groups the add-on's agent and Fluent Bit write to, `/aws/containerinsights/<cluster>/
#: <kind>` (Container Insights' documented log groups: application, dataplane, host,
#: performance).
CONTAINER_INSIGHTS_GROUPS = ("application", "dataplane", "host", "performance")
#: The languages the add-on's operator instruments (chart values.yaml
#: `manager.applicationSignals.autoMonitor.languages`).
INSTRUMENTED_LANGUAGES = ("java", "python", "dotnet", "nodejs")


def addon_configuration(quiet_namespaces: Sequence[str]) -> dict[str, Any]:
    """The add-on's configuration values: container logs on, Application Signals' automatic
    instrumentation off, and every language excluded in `quiet_namespaces` besides.

    Left unconfigured, the add-on's operator annotates every Deployment, StatefulSet and
    DaemonSet that a Service selects (aws/amazon-cloudwatch-agent-operator
    pkg/instrumentation/auto/monitor.go `isWorkloadAutoMonitored`, main at a8d766c, read
    2026-12-01), and the chart turns `monitorAllServices` on in every region Application Signals
    serves unless it is set (aws-observability/helm-charts 6.4.0,
    charts/amazon-cloudwatch-observability/templates/_helpers.tpl
    `manager.modify-auto-monitor-config`, which keeps a value the user set). The model Service
    selects the leader StatefulSet and LWS's headless Service both ranks: each pod would get the
    injected init containers (requests below limits) and PYTHONPATH/OTEL_* in vllm, the first
    container, and fall from Guaranteed to Burstable. `exclude` (monitor.go `MutateObject`
    deletes excluded languages last) keeps the namespaces out even if the first switch is
    ever ignored.
    """
    nothing = {"namespaces": [], "deployments": [], "daemonsets": [], "statefulsets": []}
    return {
        "containerLogs": {"enabled": True},
        "manager": {
            "applicationSignals": {
                "autoMonitor": {
                    "monitorAllServices": False,
                    "restartPods": False,
                    "languages": list(INSTRUMENTED_LANGUAGES),
                    "exclude": {
                        lang: {**nothing, "namespaces": sorted(quiet_namespaces)}
                        for lang in INSTRUMENTED_LANGUAGES
                    },
                    "customSelector": {lang: dict(nothing) for lang in INSTRUMENTED_LANGUAGES},
                }
            }
        },
    }


@dataclass(frozen=True)
class ClusterLogsArgs:
    """The cluster whose container logs are shipped."""

    #: The cluster the add-on goes into.
    cluster: ClusterRef
    #: Namespace of the model pods, for the ready-made query; never instrumented.
    app_namespace: str
    #: Other namespaces the add-on's operator must leave alone (the LWS controller's).
    quiet_namespaces: Sequence[str] = ("lws-system",)
    #: Days CloudWatch keeps the application logs.
    retention_days: int = 30


def logs_query(namespace: str) -> str:
    """CloudWatch Logs Insights query for the model's containers, across group recreations."""
    return (
        "fields @timestamp, kubernetes.pod_name, kubernetes.container_name, log"
        f" | filter kubernetes.namespace_name = '{namespace}'"
        " | sort @timestamp asc | limit 1000"
    )


class ClusterLogs(pulumi.ComponentResource):
    """The add-on, the IAM role its agent assumes, and the application log group it writes to."""

    log_group_name: pulumi.Output[str]
    """Log group holding every container's output."""
    query: pulumi.Output[str]
    """Logs Insights query for the model's pods."""

    def __init__(
        self, name: str, args: ClusterLogsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma-graviton:observability:ClusterLogs", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # The agent writes to these fixed names and creates a missing one with no retention
        # (kept, and billed, forever; and left behind by `pulumi destroy`). Creating them here
        # first, the add-on after them, sets their retention and makes them the stack's.
        groups = {
            kind: aws.cloudwatch.LogGroup(
                f"{name}-{kind}",
                name=pulumi.Output.concat(
                    "/aws/containerinsights/", args.cluster.cluster_name, f"/{kind}"
                ),
                retention_in_days=args.retention_days,
                opts=child,
            )
            for kind in CONTAINER_INSIGHTS_GROUPS
        }
        group = groups["application"]
        addon_with_role(
            f"{name}-addon",
            args.cluster,
            addon=ADDON,
            namespace=AGENT_NAMESPACE,
            service_account=AGENT_SERVICE_ACCOUNT,
            parent=self,
            depends_on=list(groups.values()),
            configuration=addon_configuration([args.app_namespace, *args.quiet_namespaces]),
        )
        self.log_group_name = group.name
        self.query = pulumi.Output.from_input(logs_query(args.app_namespace))
        self.register_outputs({"logGroupName": self.log_group_name, "query": self.query})
