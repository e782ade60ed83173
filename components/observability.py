"""Logs that outlive a LeaderWorkerSet group recreation: the EKS CloudWatch observability add-on.

LWS deletes a failed group's pods, and their logs with them. The add-on's Fluent Bit ships every
container's output to CloudWatch Logs as it is written, so vLLM's start-up error is still there
after the group is gone. The EKS add-on (rather than a self-managed Fluent Bit chart) keeps the
agent's versions matched to the cluster's and is upgraded with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.addons import ClusterRef, addon_with_role, aws_managed_policy

ADDON = "amazon-cloudwatch-observability"
AGENT_NAMESPACE = "amazon-cloudwatch"
AGENT_SERVICE_ACCOUNT = "cloudwatch-agent"


@dataclass(frozen=True)
class ClusterLogsArgs:
    """The cluster whose container logs are shipped."""

    #: The cluster the add-on goes into.
    cluster: ClusterRef
    #: Namespace of the model pods, for the ready-made query.
    app_namespace: str
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
        # The add-on writes to this fixed name; creating it here sets retention and ownership.
        group = aws.cloudwatch.LogGroup(
            f"{name}-application",
            name=pulumi.Output.concat(
                "/aws/containerinsights/", args.cluster.cluster_name, "/application"
            ),
            retention_in_days=args.retention_days,
            opts=child,
        )
        addon_with_role(
            f"{name}-addon",
            args.cluster,
            addon=ADDON,
            namespace=AGENT_NAMESPACE,
            service_account=AGENT_SERVICE_ACCOUNT,
            managed_policy_arns=[aws_managed_policy("CloudWatchAgentServerPolicy", self)],
            parent=self,
            depends_on=[group],
        )
        self.log_group_name = group.name
        self.query = pulumi.Output.from_input(logs_query(args.app_namespace))
        self.register_outputs({"logGroupName": self.log_group_name, "query": self.query})
