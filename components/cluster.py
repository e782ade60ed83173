"""The EKS cluster and its one managed node group of Graviton instances.

The control plane spans two zones (EKS requires it); the node group sits in one subnet of one zone,
with a fixed size (min = desired = max) because the model's pipeline ranks need every node.
Authentication uses EKS access entries only (``API`` mode, no aws-auth ConfigMap). The node role
needs no access entry of ours: EKS creates the ``EC2_LINUX`` entry for a managed node group's role
itself, and pulumi-eks 4.x in ``API`` mode neither checks ``instanceRoles`` for managed node groups
nor turns them into access entries.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

if TYPE_CHECKING:
    from components.autoscaling import ElasticNodes

IDENTITY_AGENT = "eks-pod-identity-agent"
"""The EKS add-on that serves the pods' credentials on every node (EKS Pod Identity)."""

AMI_TYPE = "AL2023_ARM_64_STANDARD"
"""Amazon Linux 2023 for arm64 (Graviton); set explicitly, the EKS default is x86_64."""

ROOT_DEVICE_NAME = "/dev/xvda"
"""The root volume's device name on the AL2023 EKS AMIs."""

ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
"""EKS access policy of `admin_arns`: cluster-admin, cluster scope."""
VIEWER_POLICY = "AmazonEKSAdminViewPolicy"
"""EKS access policy of `viewer_arns`: read every object, Secrets included, cluster scope."""

TAGGED_AT_LAUNCH = ("instance", "volume", "network-interface")
"""What a node launch creates that costs money or names the stack: tagged from the template."""

CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator")
"""Control-plane logs sent to CloudWatch: enough to debug access, not the noisy scheduler."""
CONTROL_PLANE_LOG_DAYS = 30
"""Days CloudWatch keeps them (EKS creates the group without a retention: kept forever)."""


#: nodeadm configuration EKS merges into the AL2023 nodes' user data. The static CPU manager gives
#: a Guaranteed pod with whole CPUs an exclusive cpuset: vLLM binds one OpenMP thread per CPU it
#: sees, and without it would see every CPU of the node while its quota allows only its limit.
NODE_CONFIG = """MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      cpuManagerPolicy: static

--//--
"""


@dataclass(frozen=True)
class ClusterArgs:
    """What the cluster needs: where it lives and the shape of its single node group."""

    name: str
    """The EKS cluster's name. Fixed, not auto-named: EKS writes the control plane's logs to
    `/aws/eks/<name>/cluster`, which this component creates first, with a retention."""

    vpc_id: pulumi.Input[str]
    """The VPC the cluster and its nodes live in."""
    control_plane_subnet_ids: pulumi.Input[Sequence[str]]
    """Subnets in two availability zones for the control plane's network interfaces."""
    node_subnet_id: pulumi.Input[str]
    """The one subnet (one zone) every node is launched in."""
    kubernetes_version: str
    """The EKS Kubernetes version, e.g. "1.35"."""
    instance_type: str
    """The planned Graviton instance type, e.g. "m7g.2xlarge"."""
    node_count: int
    """How many nodes; the group's minimum, desired and maximum size are all this number."""
    node_disk_gib: int
    """Size of each node's encrypted gp3 root volume in GiB (images and model cache live here)."""
    node_labels: Mapping[str, str]
    """Kubernetes labels put on every node; the workload's nodeSelector uses them."""
    surge_nodes: int = 0
    """Nodes a rollout's surge groups need above `node_count` on a fixed node group: its maximum
    allows them (the plan never asks for any without a node autoscaler, so this is 0 there). An
    elastic group's maximum is `elastic.max_nodes` alone."""
    public_access_cidrs: Sequence[str] = ()
    """Ranges admitted to the public API endpoint (operators, CI runners). Empty turns the public
    endpoint off; the private endpoint is always on, for the nodes."""
    admin_arns: Sequence[str] = ()
    """IAM roles and users with AmazonEKSClusterAdminPolicy on the whole cluster. Never the
    principal that creates the cluster (whoever runs the stack's first `pulumi up`): EKS gives it
    an admin entry of its own, and a second entry for the same principal fails the update with
    ResourceInUseException. pulumi-eks 4.x sets ``bootstrapClusterCreatorAdminPermissions: true``
    whenever ``authenticationMode`` is set and ignores later changes to it
    (nodejs/eks/cluster/cluster.ts); the Python ``eks.Cluster`` of pulumi_eks 4.4.0 has no input
    to turn it off, so the creator cannot be listed like everyone else."""
    viewer_arns: Sequence[str] = ()
    """IAM roles and users with AmazonEKSAdminViewPolicy on the whole cluster. Never the
    creator either, for the same reason."""
    addon_versions: Mapping[str, str] = field(default_factory=dict)
    """Add-on name -> pinned version for `kubernetes_version` (`infra/plan/addons.py`): vpc-cni
    and kube-proxy (installed by pulumi-eks with the cluster) and coredns (installed here after
    the nodes). Without a pin pulumi-eks asks for the most recent version at every deploy."""
    instance_tags: Mapping[str, str] = field(default_factory=dict)
    """Tags for each node's instance, root volume and network interfaces. The provider's default
    tags do not reach what the node group's Auto Scaling group launches, and EKS does not copy
    node group tags to instances, so they go in the launch template."""
    elastic: ElasticNodes | None = None
    """Set for an elastic stack: the model nodes scale from 0 and a system group is added.
    None keeps one fixed-size node group, as before."""
    service_role: aws.iam.Role | None = None
    """The role EKS manages the cluster with: the bootstrap's (`components.stack_roles`), read
    by name. pulumi-eks would create one without it, which the deploy role may not."""
    node_role: aws.iam.Role | None = None
    """The nodes' role, the bootstrap's too."""

    def __post_init__(self) -> None:
        if self.node_count < 1:
            raise ValueError(
                f"`node_count` is {self.node_count}, but the node group needs at least one node; "
                "set it to 1 or more"
            )
        both = sorted(set(self.admin_arns) & set(self.viewer_arns))
        if both:
            raise ValueError(
                f"{both[0]} is in both `admin_arns` and `viewer_arns`, but EKS allows one access "
                "entry per principal; keep it in one list"
            )
        if self.node_disk_gib < 20:
            raise ValueError(
                f"`node_disk_gib` is {self.node_disk_gib}, below the 20 GiB the EKS AL2023 AMI "
                "needs; set it to 20 or more"
            )


def _pin(args: ClusterArgs, addon: str) -> str:
    if addon not in args.addon_versions:
        raise ValueError(
            f"`addon_versions` has no {addon} version; pin it for Kubernetes "
            f"{args.kubernetes_version} in infra/plan/addons.py"
        )
    return args.addon_versions[addon]


class Cluster(pulumi.ComponentResource):
    """An EKS cluster (pulumi-eks) with one fixed-size managed node group.

    Owns the ``eks.Cluster`` (which brings its security group and default add-ons), the nodes'
    launch template, the ``eks.ManagedNodeGroup``, the CoreDNS and Pod Identity agent add-ons,
    and the Kubernetes provider every in-cluster resource uses. Its IAM roles are the
    bootstrap's (`components.stack_roles`): it creates none.
    """

    cluster_name: pulumi.Output[str]
    """The EKS cluster's physical name (`ClusterArgs.name`)."""
    kubeconfig: pulumi.Output[str]
    """A JSON kubeconfig (``aws eks get-token`` exec auth), marked secret."""
    provider: k8s.Provider
    """The Kubernetes provider built from the cluster's kubeconfig; pass it to in-cluster
    resources (pulumi-eks 4.x in Python has no usable ``cluster.provider``)."""
    node_role_name: pulumi.Output[str]
    """Name of the nodes' IAM role."""
    node_role_arn: pulumi.Output[str]
    """ARN of the nodes' IAM role."""
    node_group_name: pulumi.Output[str]
    """The managed node group's physical name."""
    access_entries: list[pulumi.Resource]
    """The access entries of `admin_arns` and `viewer_arns` and their policy associations."""
    coredns: aws.eks.Addon
    """CoreDNS as a managed add-on, created once the nodes exist (its pods need them)."""
    identity_agent: aws.eks.Addon
    """The EKS Pod Identity agent add-on (a DaemonSet): what gives the pods of the add-ons, the
    autoscaler and the collector their roles' credentials."""
    node_group: eks.ManagedNodeGroup
    """The node group itself, for ``depends_on`` from in-cluster installs that need schedulable
    nodes but take no data from them (e.g. a controller whose webhooks must answer)."""
    system_node_group: eks.ManagedNodeGroup | None
    """The always-on system node group of an elastic stack (None otherwise): where controllers
    and add-ons run while no model node does."""

    def __init__(
        self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma-graviton:cluster:Cluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        control_plane_logs = aws.cloudwatch.LogGroup(
            f"{name}-control-plane-logs",
            name=f"/aws/eks/{args.name}/cluster",
            retention_in_days=CONTROL_PLANE_LOG_DAYS,
            opts=child,
        )
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self))
        if args.service_role is None or args.node_role is None:
            raise ValueError("`service_role` and `node_role` are the bootstrap's roles; pass both")
        node_role = args.node_role
        cluster = self._control_plane(
            name,
            args,
            args.service_role,
            pulumi.ResourceOptions(parent=self, depends_on=[control_plane_logs]),
        )
        self.access_entries = self._access_entries(name, args, cluster, partition.partition)
        launch_template = node_launch_template(name, args.node_disk_gib, args.instance_tags, child)
        group = functools.partial(self._node_group, args, cluster, node_role, launch_template)
        node_group = group(
            f"{name}-nodes",
            args.instance_type,
            args.node_labels,
            model_scaling(args.node_count, args.surge_nodes, args.elastic),
        )
        # An elastic stack's small always-on group for CoreDNS, the controllers, KEDA, the
        # autoscaler, the collector and the door; fixed size, untainted. The model nodes' launch
        # template: the same IMDS hop limit keeps pods off the node role, the same instance tags
        # reach the instances. After the model node group: on destroy the system nodes go first,
        # so whatever runs on them (add-ons, controllers) is gone before any model node is.
        elastic = args.elastic
        self.system_node_group = (
            None
            if elastic is None
            else group(
                f"{name}-system-nodes",
                elastic.system_instance_type,
                elastic.system_labels,
                {"scaling_config": fixed_size(elastic.system_nodes)},
                after=[node_group],
            )
        )
        nodes = self.system_node_group or node_group
        self.coredns = self._addon(f"{name}-coredns", "coredns", args, cluster, nodes)
        # The agent on the host network of every node trades a pod's service-account token for
        # its role's credentials with the node role's `eks-auth:AssumeRoleForPodIdentity`; the
        # pods that call AWS wait for it (`components.addons.ClusterRef.after_identity`).
        self.identity_agent = self._addon(
            f"{name}-pod-identity-agent", IDENTITY_AGENT, args, cluster, nodes
        )

        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=cluster.kubeconfig_json,
            enable_server_side_apply=True,
            # A Secret whose value changes (a rotated API key or HF token) is patched in place.
            # Without this the provider marks `.data`/`.stringData` as replace-only
            # (pulumi/pulumi-kubernetes v4.32.0 provider/pkg/provider/diff.go,
            # `forceNewProperties`), and a Secret with a fixed name is deleted before its
            # replacement exists. Secrets marked `immutable` would still be replaced; none is.
            enable_secret_mutable=True,
            # The same for a ConfigMap (the gatekeeper's config when a limit changes): patched in
            # place, never deleted before its replacement exists. A changed option is an update
            # of the provider, not a replacement (provider/pkg/provider/provider.go `DiffConfig`
            # replaces only when the kubeconfig's active cluster changes; read 2026-12-06). The
            # group's programs are an immutable ConfigMap named by their digest
            # (`pods.programs_config`).
            enable_config_map_mutable=True,
            # Whoever runs `pulumi up` or `destroy` may hold its access through one of these
            # entries: every Kubernetes object is created after them and deleted before them.
            opts=pulumi.ResourceOptions(parent=self, depends_on=self.access_entries),
        )
        self.cluster_name = cluster.eks_cluster.name
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig_json)
        self.node_role_name = node_role.name
        self.node_role_arn = node_role.arn
        self.node_group = node_group
        self.node_group_name = node_group.node_group.node_group_name
        self.register_outputs(
            {
                "clusterName": self.cluster_name,
                "kubeconfig": self.kubeconfig,
                "nodeRoleName": self.node_role_name,
                "nodeRoleArn": self.node_role_arn,
                "nodeGroupName": self.node_group_name,
            }
        )

    @staticmethod
    def _control_plane(
        name: str, args: ClusterArgs, service_role: aws.iam.Role, child: pulumi.ResourceOptions
    ) -> eks.Cluster:
        """The EKS control plane and the VPC CNI settings."""
        return eks.Cluster(
            f"{name}-eks",
            service_role=service_role,
            name=args.name,
            vpc_id=args.vpc_id,
            subnet_ids=args.control_plane_subnet_ids,
            version=args.kubernetes_version,
            authentication_mode=eks.AuthenticationMode.API,
            enabled_cluster_log_types=list(CONTROL_PLANE_LOG_TYPES),
            # The only nodes are the managed node group below.
            skip_default_node_group=True,
            # No OIDC provider: the pods that call AWS get their roles through EKS Pod Identity
            # (its agent add-on), whose roles the bootstrap creates before any cluster exists.
            create_oidc_provider=False,
            # Public only for the listed ranges (pulumi-eks passes `publicAccessCidrs` to the
            # cluster's vpcConfig and refuses it without public access,
            # nodejs/eks/cluster/cluster.ts); nodes use the private endpoint inside the VPC.
            endpoint_public_access=bool(args.public_access_cidrs),
            public_access_cidrs=list(args.public_access_cidrs) or None,
            endpoint_private_access=True,
            # The VPC CNI enforces NetworkPolicy only with its policy agent turned on; without it
            # the model server's policy would be accepted and ignored.
            vpc_cni_options=eks.VpcCniOptionsArgs(
                enable_network_policy=True, addon_version=_pin(args, "vpc-cni")
            ),
            # Pinned: pulumi-eks otherwise asks for the most recent kube-proxy at every deploy
            # (nodejs/eks/cluster/cluster.ts, `mostRecent: true`, master at 7bf0c1b read
            # 2026-12-01), so an unchanged stack could upgrade it unreviewed.
            kube_proxy_addon_options=eks.KubeProxyAddonOptionsArgs(
                version=_pin(args, "kube-proxy")
            ),
            # pulumi-eks installs no coredns add-on with `skip_default_node_group` (same file:
            # only with a default node group, Fargate or auto mode); EKS's self-managed CoreDNS
            # would never be upgraded. `_addon` installs it after the nodes.
            coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
            opts=child,
        )

    def _addon(
        self,
        resource: str,
        addon: str,
        args: ClusterArgs,
        cluster: eks.Cluster,
        nodes: eks.ManagedNodeGroup,
    ) -> aws.eks.Addon:
        """`addon` as a managed add-on at its pinned version. CoreDNS and the Pod Identity
        agent (a DaemonSet) turn ACTIVE only once their pods run, so each waits for the node
        group, and on destroy goes before it."""
        return aws.eks.Addon(
            resource,
            cluster_name=cluster.eks_cluster.name,
            addon_name=addon,
            addon_version=_pin(args, addon),
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            opts=pulumi.ResourceOptions(parent=self, depends_on=[nodes]),
        )

    def _access_entries(
        self,
        name: str,
        args: ClusterArgs,
        cluster: eks.Cluster,
        partition: pulumi.Output[str],
    ) -> list[pulumi.Resource]:
        """One access entry per listed principal, with its access policy on the whole cluster
        (both returned, entry then association).

        Named after a hash of the ARN, so reordering the list replaces nothing.
        """
        entries = []
        for policy, arns in ((ADMIN_POLICY, args.admin_arns), (VIEWER_POLICY, args.viewer_arns)):
            for arn in arns:
                key = f"{name}-access-{hashlib.sha256(arn.encode()).hexdigest()[:8]}"
                entry = aws.eks.AccessEntry(
                    key,
                    cluster_name=cluster.eks_cluster.name,
                    principal_arn=arn,
                    type="STANDARD",
                    opts=pulumi.ResourceOptions(parent=self),
                )
                association = aws.eks.AccessPolicyAssociation(
                    f"{key}-policy",
                    cluster_name=cluster.eks_cluster.name,
                    principal_arn=entry.principal_arn,
                    policy_arn=pulumi.Output.concat(
                        "arn:", partition, ":eks::aws:cluster-access-policy/", policy
                    ),
                    access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                    opts=pulumi.ResourceOptions(parent=self),
                )
                entries += [entry, association]
        return entries

    def _node_group(
        self,
        args: ClusterArgs,
        cluster: eks.Cluster,
        node_role: aws.iam.Role,
        launch_template: aws.ec2.LaunchTemplate,
        resource: str,
        instance_type: str,
        labels: Mapping[str, str],
        scaling: dict[str, object],
        after: Sequence[pulumi.Resource] = (),
    ) -> eks.ManagedNodeGroup:
        """A managed node group of Graviton instances in the node subnet, launched from the
        nodes' template."""
        return eks.ManagedNodeGroup(
            resource,
            cluster=cluster,
            node_role_arn=node_role.arn,
            ami_type=AMI_TYPE,
            # The cluster's version, always: pulumi-eks fills it in only when there is no launch
            # template (nodejs/eks/nodes/nodegroup.ts `createManagedNodeGroupInternal`, "we can
            # only do that if the user doesn't provide a launch template", master at 7bf0c1b
            # read 2026-12-01). Without it a `kubernetesVersion` change upgrades the control
            # plane and leaves the nodes, and EKS refuses the next control-plane upgrade.
            version=args.kubernetes_version,
            instance_types=[instance_type],
            capacity_type="ON_DEMAND",
            **scaling,
            subnet_ids=[args.node_subnet_id],
            labels=dict(labels),
            # The disk size lives in the launch template: EKS rejects `disk_size` beside one.
            launch_template=launched_from(launch_template),
            opts=pulumi.ResourceOptions(
                parent=self,
                # The cluster arrives as a resource reference, which the SDK leaves out of the
                # dependencies it reports (pulumi/runtime/rpc.py
                # `exclude_resource_refs_from_deps`): named here, the nodes are deleted before
                # the control plane, never after.
                depends_on=[*after, cluster],
            ),
        )


def node_launch_template(
    name: str,
    disk_gib: int,
    instance_tags: Mapping[str, str],
    child: pulumi.ResourceOptions,
) -> aws.ec2.LaunchTemplate:
    """The nodes' root volume, instance metadata settings and nodeadm configuration (the
    model nodes' of a cluster the stack creates or reads)."""
    return aws.ec2.LaunchTemplate(
        f"{name}-node-lt",
        description="Root volume and instance metadata settings of the EKS managed nodes",
        block_device_mappings=[
            aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name=ROOT_DEVICE_NAME,
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=disk_gib,
                    volume_type="gp3",
                    encrypted="true",
                    delete_on_termination="true",
                ),
            )
        ],
        # IMDSv2 only, and a PUT response hop limit of 1: a pod's request crosses one more
        # hop than the node's own, so pods cannot fetch the node role's credentials and get
        # their own through EKS Pod Identity. Host-network daemons (VPC CNI, kube-proxy, the
        # Pod Identity agent, which trades with the node role, the CloudWatch agent and Fluent
        # Bit, which have roles of their own) still reach the metadata.
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
            http_endpoint="enabled",
            http_tokens="required",
            http_put_response_hop_limit=1,
        ),
        user_data=base64.b64encode(NODE_CONFIG.encode()).decode(),
        # "Default tags are currently not propagated to ASG created resources"
        # (pulumi-aws 7.51.1 ec2/launch_template.py, `tag_specifications`).
        tag_specifications=[
            aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=dict(instance_tags))
            for kind in TAGGED_AT_LAUNCH
        ]
        if instance_tags
        else None,
        opts=child,
    )


def launched_from(template: aws.ec2.LaunchTemplate) -> aws.eks.NodeGroupLaunchTemplateArgs:
    """A node group's reference to the nodes' launch template, at its latest version."""
    return aws.eks.NodeGroupLaunchTemplateArgs(
        id=template.id, version=template.latest_version.apply(str)
    )


def fixed_size(nodes: int, surge_nodes: int = 0) -> aws.eks.NodeGroupScalingConfigArgs:
    """`nodes` nodes always, and room for `surge_nodes` more."""
    return aws.eks.NodeGroupScalingConfigArgs(
        min_size=nodes, desired_size=nodes, max_size=nodes + surge_nodes
    )


def model_scaling(
    node_count: int, surge_nodes: int, elastic: ElasticNodes | None
) -> dict[str, object]:
    """The model node group's size: fixed at `node_count` (room for a rollout's surge nodes
    above it, none on a fixed stack), or an elastic stack's (`ElasticNodes.scaling`)."""
    if elastic is None:
        return {"scaling_config": fixed_size(node_count, surge_nodes)}
    return elastic.scaling()
