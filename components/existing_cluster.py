"""The model's nodes in an EKS cluster the stack does not own: the cluster is read, never changed.

The stack adds one managed node group of the planned Graviton type in one subnet of the planned
zone, tainted so that only the stack's model pods run there (the launch template of
`components.cluster`: IMDSv2 with hop limit 1, the static CPU manager, the stack's tags on what
it launches), the Pod Identity agent when the cluster lacks it, and a Kubernetes provider for
the cluster's endpoint. Everything else of the cluster (its network, control plane, access
entries, other add-ons and nodes) is its owner's: `pulumi destroy` removes the node group and
what the stack put on it, nothing more.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.cluster import (
    AMI_TYPE,
    IDENTITY_AGENT,
    launched_from,
    model_scaling,
    node_launch_template,
)


def kubeconfig(cluster: str, endpoint: str, certificate: str, region: str) -> dict[str, Any]:
    """A kubeconfig for `cluster` that authenticates with `aws eks get-token` (the shape
    pulumi-eks and `aws eks update-kubeconfig` write), as whoever runs the program."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster,
                "cluster": {"server": endpoint, "certificate-authority-data": certificate},
            }
        ],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": cluster}}],
        "current-context": cluster,
        "users": [
            {
                "name": cluster,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "aws",
                        "args": [
                            "--region",
                            region,
                            "eks",
                            "get-token",
                            "--cluster-name",
                            cluster,
                            "--output",
                            "json",
                        ],
                    }
                },
            }
        ],
    }


@dataclass(frozen=True)
class ExistingClusterArgs:
    """The cluster as the program read it, and the node group the plan asks for."""

    #: The cluster's name (`existingCluster`).
    name: str
    #: Its API endpoint and certificate authority (base64 PEM), as EKS describes them.
    endpoint: str
    certificate_authority: str
    region: str
    #: The cluster's Kubernetes version: the nodes run it too.
    kubernetes_version: str
    #: The one subnet of the planned zone the nodes go into (checked for zone and room).
    node_subnet_id: str
    instance_type: str
    node_count: int
    node_disk_gib: int
    #: Labels the model pods select.
    node_labels: Mapping[str, str]
    #: The bootstrap's node role, read by name.
    node_role: aws.iam.Role
    #: The nodes' NoSchedule taint (`spec.stack_taint`): only the pods that must run there
    #: tolerate it, so the cluster's other pods cannot take the memory the plan sized.
    node_taint: Mapping[str, str]
    #: Nodes a rollout's surge groups need above `node_count`.
    surge_nodes: int = 0
    #: Tags for each node's instance, root volume and network interfaces.
    instance_tags: Mapping[str, str] = field(default_factory=dict)
    #: The Pod Identity agent's pinned version when the stack creates it (the cluster runs
    #: none); None when the cluster's own agent serves the pods.
    identity_agent_version: str | None = None


class ExistingCluster(pulumi.ComponentResource):
    """The node group, the agent if the cluster lacks it, and the provider, in a cluster read
    by name; the cluster itself is no resource of the stack."""

    cluster_name: pulumi.Output[str]
    """The cluster's name."""
    kubeconfig: pulumi.Output[str]
    """A JSON kubeconfig (``aws eks get-token`` exec auth), marked secret."""
    provider: k8s.Provider
    """The Kubernetes provider for the cluster's endpoint; pass it to in-cluster resources."""
    node_group: aws.eks.NodeGroup
    """The model's managed node group, for ``depends_on`` of what must run on it and go first."""
    identity_agent: aws.eks.Addon | None
    """The Pod Identity agent the stack created, or None when the cluster runs its own."""

    def __init__(
        self, name: str, args: ExistingClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma-graviton:cluster:ExistingCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        template = node_launch_template(name, args.node_disk_gib, args.instance_tags, child)
        self.node_group = aws.eks.NodeGroup(
            f"{name}-nodes",
            cluster_name=args.name,
            node_role_arn=args.node_role.arn,
            ami_type=AMI_TYPE,
            # The cluster's version, so that its owner's next control-plane upgrade is not
            # refused for nodes behind it.
            version=args.kubernetes_version,
            instance_types=[args.instance_type],
            capacity_type="ON_DEMAND",
            **model_scaling(args.node_count, args.surge_nodes, None),
            subnet_ids=[args.node_subnet_id],
            labels=dict(args.node_labels),
            taints=[
                aws.eks.NodeGroupTaintArgs(
                    key=args.node_taint["key"], value=args.node_taint["value"], effect="NO_SCHEDULE"
                )
            ],
            launch_template=launched_from(template),
            opts=child,
        )
        self.identity_agent = (
            None
            if args.identity_agent_version is None
            else aws.eks.Addon(
                f"{name}-pod-identity-agent",
                cluster_name=args.name,
                addon_name=IDENTITY_AGENT,
                addon_version=args.identity_agent_version,
                # NONE: should an agent appear meanwhile, creating ours fails rather than
                # overwriting what the cluster's owner configured.
                resolve_conflicts_on_create="NONE",
                resolve_conflicts_on_update="OVERWRITE",
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.node_group]),
            )
        )
        config = json.dumps(
            kubeconfig(args.name, args.endpoint, args.certificate_authority, args.region)
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=config,
            enable_server_side_apply=True,
            # As the created cluster's provider (`components.cluster`): a rotated Secret is
            # patched in place, and so is a ConfigMap.
            enable_secret_mutable=True,
            enable_config_map_mutable=True,
            opts=child,
        )
        self.cluster_name = pulumi.Output.from_input(args.name)
        self.kubeconfig = pulumi.Output.secret(config)
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig})
