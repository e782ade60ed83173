"""Groups that follow the queue and nodes that follow the groups: KEDA and the Cluster Autoscaler
from their pinned charts, the autoscaler's IAM role (the bootstrap's, through EKS Pod Identity,
as the add-ons' roles), and the ScaledObject on the LeaderWorkerSet.

The node autoscaler is the Cluster Autoscaler on the managed node group, not Karpenter: the
model nodes are one type in one zone already held by a managed node group (its launch template,
AMI updates and node replacement stay as they are), so there is no instance choice for Karpenter
to make, and the Cluster Autoscaler needs no NodePool, EC2NodeClass, SQS interruption queue or
node role of its own. It scales a managed node group up from 0 by asking EKS for the group's
labels and taints (`eks:DescribeNodegroup`) and the instance type for its resources
(kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md, "Auto-Discovery Setup"
and the DescribeNodegroup note, master at 55c37cd read 2026-12-02); EKS tags a managed node
group's Auto Scaling group for the autoscaler's auto-discovery itself.

A group that cannot serve adds nothing to the queue KEDA reads, and the always-on queue floor
keeps the trigger answering, so KEDA scales to zero groups within `ScalerSpec.to_zero_s`
(`components.manifests.scaling` says why and cites KEDA); the autoscaler removes the emptied
nodes after `--scale-down-unneeded-time`. Inside the schedule the cron trigger keeps the group it
asks for, serving or not: the idle-nodes alarm (`components.watch`) says when model nodes have
been up with no Ready leader for longer than both. The autoscaler stops waiting for a node that
never comes after `--max-node-provision-time` (15 min) and backs the node group off.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.addons import ClusterRef, PodIdentity, pod_identity
from components.manifests import ServerSpec, gatekeeper_map
from components.manifests.door import objects as door_objects
from components.manifests.identity import AUTOSCALER_NAMESPACE, AUTOSCALER_SERVICE_ACCOUNT
from components.manifests.scaling import (
    KEDA_NAMESPACE,
    ScalerSpec,
    floor_config_map,
    floor_deployment,
    floor_disruption_budget,
    floor_network_policy,
    metrics_service,
    scaled_object,
)
from components.manifests.spec import KEY_ANNOTATION, config_digest
from components.objects import create

KEDA_CHART = "keda"
KEDA_REPO = "https://kedacore.github.io/charts"
#: kedacore/charts keda/Chart.yaml, version and appVersion 2.20.2 (released 2026-07-31).
KEDA_CHART_VERSION = "2.20.2"
AUTOSCALER_CHART = "cluster-autoscaler"
AUTOSCALER_REPO = "https://kubernetes.github.io/autoscaler"
#: kubernetes/autoscaler cluster-autoscaler/charts/cluster-autoscaler/Chart.yaml 9.59.0
#: (appVersion 1.35.0). The image is the one of the cluster's minor (`AutoscalingArgs`); the
#: chart's arguments (cloud provider, auto-discovery, the `extraArgs` below) exist in each.
AUTOSCALER_CHART_VERSION = "9.59.0"
#: The autoscaler's requests (the chart sets none); the planner counts them on the system nodes.
AUTOSCALER_RESOURCES = {"cpu": "100m", "memory": "300Mi"}


@dataclass(frozen=True)
class ElasticNodes:
    """An elastic stack's nodes: the model node group scales from 0 under the Cluster
    Autoscaler, tainted for the model pods alone; a small always-on system group runs the rest."""

    #: The model node group's maximum size: a fixed ceiling (`infra.plan.elastic.
    #: MODEL_NODES_CEILING`), never a figure that `maxGroups` or `rolloutSurge` moves. A changed
    #: maximum makes the AWS provider send the desired size from Pulumi's state with it, which
    #: is not the autoscaler's (see `scaling`).
    max_nodes: int
    system_instance_type: str
    system_nodes: int
    system_labels: Mapping[str, str]
    #: The taint only the model pods tolerate (key, value, effect).
    model_taint: Mapping[str, str]

    def scaling(self) -> dict[str, object]:
        """The model node group from 0 to `max_nodes`, the Cluster Autoscaler owning the desired
        size, tainted for the model pods. The block never changes after creation. When any of
        its fields changes, the AWS provider sends all three to `UpdateNodegroupConfig`
        (hashicorp/terraform-provider-aws internal/service/eks/node_group.go
        `resourceNodeGroupUpdate` and `expandNodegroupScalingConfig`, commit 012e0a32 read
        2026-12-03), and the desired size it sends is the ignored one from Pulumi's state, stale
        unless a refresh ran first (pulumi docs `ignorechanges.md`, read 2026-12-03): EKS would
        resize the group to it and terminate serving nodes."""
        taint = self.model_taint
        return {
            "scaling_config": aws.eks.NodeGroupScalingConfigArgs(
                min_size=0, desired_size=0, max_size=self.max_nodes
            ),
            # A `pulumi up` leaves the autoscaler's count alone (pulumi-eks ManagedNodeGroup).
            "ignore_scaling_changes": True,
            "taints": [
                aws.eks.NodeGroupTaintArgs(
                    key=taint["key"], value=taint["value"], effect="NO_SCHEDULE"
                )
            ],
        }


@dataclass(frozen=True)
class AutoscalingArgs:
    """The cluster, where the system pods run, and the model server the ScaledObject scales."""

    #: The cluster (the autoscaler's role, the Pod Identity agent) and the system nodes to wait on.
    cluster: ClusterRef
    region: str
    #: Labels of the system nodes; KEDA and the autoscaler select them.
    system_labels: Mapping[str, str]
    server: ServerSpec
    scaler: ScalerSpec
    #: The Cluster Autoscaler image tag: the release whose minor is the cluster's.
    autoscaler_image_tag: str
    #: The LeaderWorkerSet (the ScaledObject's target), so the ScaledObject comes after it.
    workload: pulumi.Resource
    #: More ScaledObject triggers (the door's wake signal).
    extra_triggers: Sequence[dict[str, Any]] = field(default_factory=tuple)
    #: Nodes the autoscaler may run in all (`--max-nodes-total`; 0: no cap).
    max_nodes_total: int = 0


class Autoscaling(pulumi.ComponentResource):
    """KEDA, the Cluster Autoscaler with its role (EKS Pod Identity), the leaders' metrics
    Service with its queue floor, and the ScaledObject. Pass the cluster's `k8s.Provider` and
    the AWS provider in `opts.providers`."""

    scaled_object: k8s.apiextensions.CustomResource
    """The ScaledObject on the LeaderWorkerSet."""
    autoscaler_role_arn: pulumi.Output[str]
    """The Cluster Autoscaler's IAM role."""

    def __init__(
        self, name: str, args: AutoscalingArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma-graviton:autoscaling:Autoscaling", name, None, opts)
        on_nodes = [args.cluster.nodes] if args.cluster.nodes is not None else []
        keda = self._keda(name, args, on_nodes)
        identity = self._autoscaler(name, args, on_nodes)
        manifest = scaled_object(args.server, args.scaler, args.extra_triggers)
        create(metrics_service(args.server), f"{name}-leader-metrics", parent=self)
        floor = self._queue_floor(name, args, on_nodes)
        # The CRD and KEDA's webhook come with the chart; the target must exist first, and the
        # floor, so the queue trigger has an endpoint from its first poll.
        self.scaled_object = create(
            manifest, f"{name}-groups", parent=self, depends_on=[keda, args.workload, floor]
        )
        self.autoscaler_role_arn = identity.association.role_arn
        self.register_outputs({"autoscalerRoleArn": self.autoscaler_role_arn})

    def _queue_floor(
        self, name: str, args: AutoscalingArgs, on_nodes: list[pulumi.Resource]
    ) -> k8s.apps.v1.Deployment:
        """The always-on queue floor on the system nodes (`components.manifests.scaling`)."""
        floor_name = f"{name}-queue-floor"
        create(floor_config_map(args.server), floor_name, parent=self)
        create(floor_network_policy(args.server), floor_name, parent=self)
        # Its pods run on the system nodes; they go before them on destroy.
        floor = create(floor_deployment(args.server), floor_name, parent=self, depends_on=on_nodes)
        # A drain of a system node (an upgrade, the Cluster Autoscaler) takes one floor pod at
        # a time while the floor is the trigger's endpoint (`floor_disruption_budget`).
        create(floor_disruption_budget(args.server), floor_name, parent=self)
        return floor

    def _keda(
        self, name: str, args: AutoscalingArgs, on_nodes: list[pulumi.Resource]
    ) -> k8s.helm.v4.Chart:
        ns = k8s.core.v1.Namespace(
            f"{name}-keda-ns",
            metadata={"name": KEDA_NAMESPACE},
            opts=pulumi.ResourceOptions(parent=self),
        )
        system = dict(args.system_labels)
        return k8s.helm.v4.Chart(
            f"{name}-keda",
            chart=KEDA_CHART,
            version=KEDA_CHART_VERSION,
            repository_opts=k8s.helm.v4.RepositoryOptsArgs(repo=KEDA_REPO),
            namespace=ns.metadata.name,
            values={
                "nodeSelector": system,
                # KEDA may scale LeaderWorkerSets only; the chart's default is every resource
                # with a scale subresource (values.yaml `rbac.scaledRefKinds`, "*"/"*"; the
                # template grants `<kind>/scale`, so the kind is the resource's plural).
                "rbac": {
                    "scaledRefKinds": [
                        {"apiGroup": "leaderworkerset.x-k8s.io", "kind": "leaderworkersets"}
                    ]
                },
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=on_nodes),
        )

    def _autoscaler(
        self, name: str, args: AutoscalingArgs, on_nodes: list[pulumi.Resource]
    ) -> PodIdentity:
        # The bootstrap's role (`components.stack_roles`, `autoscaler_policy`).
        identity = pod_identity(
            f"{name}-autoscaler-identity",
            args.cluster,
            namespace=AUTOSCALER_NAMESPACE,
            service_account=AUTOSCALER_SERVICE_ACCOUNT,
            parent=self,
        )
        values = pulumi.Output.all(args.cluster.cluster_name, identity.pod_annotations()).apply(
            lambda parts: {
                **autoscaler_values(
                    parts[0],
                    args.region,
                    args.system_labels,
                    args.server.drain.grace_s,
                    args.autoscaler_image_tag,
                    args.max_nodes_total,
                ),
                # The association's id: a new association rolls the autoscaler's pod.
                "podAnnotations": parts[1],
            }
        )
        k8s.helm.v4.Chart(
            f"{name}-cluster-autoscaler",
            chart=AUTOSCALER_CHART,
            version=AUTOSCALER_CHART_VERSION,
            repository_opts=k8s.helm.v4.RepositoryOptsArgs(repo=AUTOSCALER_REPO),
            namespace=AUTOSCALER_NAMESPACE,
            values=values,
            # The association's wait (its id flows in through `podAnnotations` too) and the
            # agent: a pod admitted before the association is effective runs with no
            # credentials for good (EKS's webhook looks for an association only when it admits
            # the pod), gets no answer describing the groups, and exits ("Failed to create AWS
            # Manager" is fatal, cluster-autoscaler 1.35.0 cloudprovider/aws/aws_cloud_provider.go
            # `BuildAWS`, klog.Fatalf).
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[*on_nodes, identity.settled, *args.cluster.after_identity()],
            ),
        )
        return identity


def autoscaler_values(
    cluster_name: str,
    region: str,
    system_labels: Mapping[str, str],
    pod_grace_s: int,
    image_tag: str,
    max_nodes_total: int = 0,
) -> dict[str, Any]:
    """The Cluster Autoscaler chart's values: auto-discovery of this cluster's groups, its
    service account (EKS Pod Identity maps it to its role; no IRSA annotation), the pinned
    image (`image_tag`), and the system nodes. `pod_grace_s` is the model pods' grace (the
    drain's longest reply): a node the autoscaler removes gives its pods all of it."""
    return {
        "cloudProvider": "aws",
        "awsRegion": region,
        "autoDiscovery": {"clusterName": cluster_name},
        "image": {"tag": image_tag},
        "rbac": {"serviceAccount": {"name": AUTOSCALER_SERVICE_ACCOUNT}},
        "nodeSelector": dict(system_labels),
        "resources": {"requests": AUTOSCALER_RESOURCES, "limits": AUTOSCALER_RESOURCES},
        "extraArgs": {
            # Groups of one type: no expander choice to make; the defaults stated for the docs.
            "balance-similar-node-groups": "false",
            "max-node-provision-time": "15m0s",
            "scale-down-unneeded-time": "10m0s",
            # The autoscaler evicts a removed node's pods with a grace of at most this (default
            # 600 s; cluster-autoscaler FAQ.md parameters table and
            # core/scaledown/actuation/actuator.go `SingleRuleDrainConfig`, read 2026-12-02):
            # below the pods' own grace it would cut their streams.
            "max-graceful-termination-sec": str(pod_grace_s),
            "skip-nodes-with-system-pods": "false",
            # The cluster's nodes in all, the planner's peak (cluster-autoscaler FAQ.md parameters
            # table, `max-nodes-total`: "Maximum number of nodes in all node groups"; 0 is no
            # limit). The node group's own maximum is a fixed ceiling, so this is the cost cap.
            **({"max-nodes-total": str(max_nodes_total)} if max_nodes_total else {}),
        },
    }


def door(
    name: str,
    spec: ServerSpec,
    in_ns: pulumi.Output[str],
    needs: Sequence[pulumi.Resource],
    engine_print: pulumi.Output[str],
    parent: pulumi.Resource,
) -> None:
    """An elastic stack's door (`manifests.door`), as children of the model server: its
    Deployment on the system nodes after `needs` (the Secrets and the config it mounts), its
    NetworkPolicy, the leaders' Service it reaches vLLM through, and the Service KEDA reads its
    wake flag from. The door's template carries the engine key's fingerprint, so a new engine
    key rolls it (nginx reads the engine key at start); client keys are re-read."""
    digest = config_digest(gatekeeper_map.files(spec))
    for obj in door_objects(spec, digest, key_fingerprint=""):
        if obj["kind"] == "Deployment":
            annotations = obj["spec"]["template"]["metadata"]["annotations"]
            annotations[KEY_ANNOTATION] = engine_print
        create(
            obj,
            f"{name}-{obj['kind'].lower()}-{obj['metadata']['name']}",
            in_ns,
            parent=parent,
            depends_on=needs if obj["kind"] == "Deployment" else [],
        )
