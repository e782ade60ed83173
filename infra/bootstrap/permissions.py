"""From each Pulumi resource type the main program registers to the IAM actions `pulumi up`,
`pulumi refresh` and `pulumi destroy` need on it: the table the deploy roles are built from.

Pure data (no Pulumi import). tests/bootstrap/test_permissions.py runs the program under the
project's mocks for every stack, with monitoring and volumes on, and fails when a registered
type or invoke has no row here, or when a deploy role lacks an action of one.

Sources. pulumi-aws 7.51.1 bridges hashicorp/terraform-provider-aws: a resource's actions are the
AWS API operations its create, read, update and delete functions call
(`internal/service/<service>/<resource>.go`), and each API operation is authorised by the IAM
action of the same name (AWS Service Authorization Reference). Tags: the provider's default
tags are applied on create and changed with the service's tag calls. pulumi-eks 4.x components
register their children inside the remote provider, so their rows list what those children
need (pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts and nodes/nodegroup.ts, master at 7bf0c1b
read 2026-12-01). Read verbs use the service's `Describe*`/`List*`/`Get*` wildcards: they change
nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TypeActions:
    """The IAM actions one resource type (or invoke) needs, and where they come from."""

    actions: tuple[str, ...]
    source: str


_TF = "terraform-provider-aws internal/service/"
_EC2_TAGS = ("ec2:CreateTags", "ec2:DeleteTags", "ec2:Describe*")
_EKS_TAGS = ("eks:TagResource", "eks:UntagResource", "eks:ListTagsForResource", "eks:Describe*")
#: The program reads the bootstrap's roles (`aws.iam.Role.get`, components/stack_roles.py) and
#: creates none: a read is the role's GetRole and its policy listings (iam/role.go
#: `resourceRoleRead`: the role, then its inline and managed policies).
_ROLE_READS = (
    "iam:GetRole",
    "iam:ListRolePolicies",
    "iam:GetRolePolicy",
    "iam:ListAttachedRolePolicies",
)
_SECURITY_GROUPS = (
    "ec2:CreateSecurityGroup",
    "ec2:DeleteSecurityGroup",
    "ec2:AuthorizeSecurityGroupIngress",
    "ec2:AuthorizeSecurityGroupEgress",
    "ec2:RevokeSecurityGroupIngress",
    "ec2:RevokeSecurityGroupEgress",
    "ec2:ModifySecurityGroupRules",
)
_ADDON = (
    "eks:CreateAddon",
    "eks:UpdateAddon",
    "eks:DeleteAddon",
    *_EKS_TAGS,
    "eks:List*",
)
_NODE_GROUP = (
    "eks:CreateNodegroup",
    "eks:UpdateNodegroupConfig",
    "eks:UpdateNodegroupVersion",
    "eks:DeleteNodegroup",
    *_EKS_TAGS,
    "eks:List*",
    "iam:PassRole",
    "iam:GetRole",
    "iam:CreateServiceLinkedRole",
    "ec2:Describe*",
    "ec2:RunInstances",
    "ec2:CreateTags",
    "ssm:GetParameter",
)
#: Kubernetes objects are created through the cluster's API endpoint, authorised by the EKS
#: access entry EKS gives the cluster's creator; no IAM action is involved (the token comes from
#: `aws eks get-token`, a presigned sts:GetCallerIdentity, which needs no grant).
NO_AWS = TypeActions((), "no AWS API call: Kubernetes API, Pulumi engine or local")

RESOURCE_ACTIONS: dict[str, TypeActions] = {
    "aws:ec2/vpc:Vpc": TypeActions(
        ("ec2:CreateVpc", "ec2:DeleteVpc", "ec2:ModifyVpcAttribute", *_EC2_TAGS),
        _TF + "ec2/vpc_.go",
    ),
    # A subnet that GuardDuty's endpoint sits in is taken off it, nothing more: the provider
    # never deletes the endpoint (`infra.bootstrap.fences.GUARDDUTY_ENDPOINT_WRITES`, fenced
    # there; what a destroy leaves is in docs/failures.md).
    "aws:ec2/subnet:Subnet": TypeActions(
        (
            "ec2:CreateSubnet",
            "ec2:DeleteSubnet",
            "ec2:ModifySubnetAttribute",
            "ec2:ModifyVpcEndpoint",
            *_EC2_TAGS,
        ),
        _TF + "ec2/vpc_subnet.go (dissociateGuardDutyVPCEndpoints)",
    ),
    "aws:ec2/internetGateway:InternetGateway": TypeActions(
        (
            "ec2:CreateInternetGateway",
            "ec2:AttachInternetGateway",
            "ec2:DetachInternetGateway",
            "ec2:DeleteInternetGateway",
            *_EC2_TAGS,
        ),
        _TF + "ec2/vpc_internet_gateway.go",
    ),
    "aws:ec2/eip:Eip": TypeActions(
        ("ec2:AllocateAddress", "ec2:ReleaseAddress", "ec2:DisassociateAddress", *_EC2_TAGS),
        _TF + "ec2/ec2_eip.go",
    ),
    "aws:ec2/natGateway:NatGateway": TypeActions(
        ("ec2:CreateNatGateway", "ec2:DeleteNatGateway", *_EC2_TAGS),
        _TF + "ec2/vpc_nat_gateway.go",
    ),
    "aws:ec2/routeTable:RouteTable": TypeActions(
        (
            "ec2:CreateRouteTable",
            "ec2:DeleteRouteTable",
            "ec2:CreateRoute",
            "ec2:ReplaceRoute",
            "ec2:DeleteRoute",
            *_EC2_TAGS,
        ),
        _TF + "ec2/vpc_route_table.go",
    ),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": TypeActions(
        (
            "ec2:AssociateRouteTable",
            "ec2:DisassociateRouteTable",
            "ec2:ReplaceRouteTableAssociation",
            "ec2:Describe*",
        ),
        _TF + "ec2/vpc_route_table_association.go",
    ),
    # Deleting retries DeleteVolume while the volume is in use, within the delete timeout
    # (read 2026-12-01, commit 0073593 of the file).
    "aws:ebs/volume:Volume": TypeActions(
        ("ec2:CreateVolume", "ec2:ModifyVolume", "ec2:DeleteVolume", *_EC2_TAGS),
        _TF + "ec2/ebs_volume.go",
    ),
    "aws:ec2/launchTemplate:LaunchTemplate": TypeActions(
        (
            "ec2:CreateLaunchTemplate",
            "ec2:CreateLaunchTemplateVersion",
            # No ec2:ModifyLaunchTemplate: `resourceLaunchTemplateUpdate` calls it only for
            # `update_default_version` or a changed `default_version`, which the program never
            # sets (the node groups name the template's latest version themselves).
            "ec2:DeleteLaunchTemplate",
            "ec2:DeleteLaunchTemplateVersions",
            *_EC2_TAGS,
        ),
        _TF + "ec2/ec2_launch_template.go",
    ),
    "aws:eks/accessEntry:AccessEntry": TypeActions(
        ("eks:CreateAccessEntry", "eks:UpdateAccessEntry", "eks:DeleteAccessEntry", *_EKS_TAGS),
        _TF + "eks/access_entry.go",
    ),
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": TypeActions(
        ("eks:AssociateAccessPolicy", "eks:DisassociateAccessPolicy", "eks:List*"),
        _TF + "eks/access_policy_association.go",
    ),
    "aws:eks/addon:Addon": TypeActions(_ADDON, _TF + "eks/addon.go"),
    "aws:iam/role:Role": TypeActions(_ROLE_READS, _TF + "iam/role.go (read only)"),
    # A role passed to EKS Pod Identity: the caller must be able to pass it ("The IAM principal
    # that is creating the association must have iam:PassRole", EKS User Guide,
    # pod-id-association.html, read 2026-12-03).
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": TypeActions(
        (
            "eks:CreatePodIdentityAssociation",
            "eks:DescribePodIdentityAssociation",
            "eks:UpdatePodIdentityAssociation",
            "eks:DeletePodIdentityAssociation",
            "eks:ListPodIdentityAssociations",
            *_EKS_TAGS,
            "iam:PassRole",
            "iam:GetRole",
        ),
        _TF + "eks/pod_identity_association.go",
    ),
    "aws:cloudwatch/logGroup:LogGroup": TypeActions(
        (
            "logs:CreateLogGroup",
            "logs:DeleteLogGroup",
            "logs:PutRetentionPolicy",
            "logs:DeleteRetentionPolicy",
            "logs:TagResource",
            "logs:UntagResource",
            "logs:ListTagsForResource",
            "logs:Describe*",
        ),
        _TF + "logs/group.go",
    ),
    "aws:cloudwatch/logMetricFilter:LogMetricFilter": TypeActions(
        ("logs:PutMetricFilter", "logs:DeleteMetricFilter", "logs:Describe*"),
        _TF + "logs/metric_filter.go",
    ),
    "aws:cloudwatch/dashboard:Dashboard": TypeActions(
        ("cloudwatch:PutDashboard", "cloudwatch:GetDashboard", "cloudwatch:DeleteDashboards"),
        _TF + "cloudwatch/dashboard.go",
    ),
    "aws:cloudwatch/metricAlarm:MetricAlarm": TypeActions(
        (
            "cloudwatch:PutMetricAlarm",
            "cloudwatch:DescribeAlarms",
            "cloudwatch:DeleteAlarms",
            "cloudwatch:TagResource",
            "cloudwatch:UntagResource",
            "cloudwatch:ListTagsForResource",
        ),
        _TF + "cloudwatch/metric_alarm.go",
    ),
    "aws:sns/topic:Topic": TypeActions(
        (
            "sns:CreateTopic",
            "sns:DeleteTopic",
            "sns:GetTopicAttributes",
            "sns:SetTopicAttributes",
            "sns:TagResource",
            "sns:UntagResource",
            "sns:ListTagsForResource",
        ),
        _TF + "sns/topic.go",
    ),
    "aws:sns/topicSubscription:TopicSubscription": TypeActions(
        (
            "sns:Subscribe",
            "sns:Unsubscribe",
            "sns:GetSubscriptionAttributes",
            "sns:SetSubscriptionAttributes",
        ),
        _TF + "sns/topic_subscription.go",
    ),
    # pulumi-eks: its security groups and rules, the EKS cluster and the vpc-cni and kube-proxy
    # add-ons. No IAM resource: the program passes the bootstrap's service role, so pulumi-eks
    # creates none (nodejs/eks/cluster/cluster.ts `createCore`, `if (!args.serviceRole)`, no
    # instance role with `skipDefaultNodeGroup`, no OIDC provider without
    # `createOidcProvider`; master at 7bf0c1b, read 2026-12-03).
    "eks:index:Cluster": TypeActions(
        (
            "iam:GetRole",
            "iam:PassRole",
            "iam:CreateServiceLinkedRole",
            *_SECURITY_GROUPS,
            *_EC2_TAGS,
            "eks:CreateCluster",
            "eks:UpdateClusterConfig",
            "eks:UpdateClusterVersion",
            "eks:DeleteCluster",
            *_ADDON,
        ),
        "pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts (children) and " + _TF + "eks/cluster.go",
    ),
    # pulumi-eks: an aws.eks.NodeGroup; EKS's service-linked role launches the instances from
    # our launch template, whose versions the caller must be able to read, and with whose
    # template the caller itself must be allowed to launch: "The IAM entity calling the
    # CreateNodegroup or UpdateNodegroupVersion APIs must have permissions for
    # ec2:RunInstances and ec2:CreateTags" (EKS User Guide, "Customize managed nodes with
    # launch templates", launch-templates.html, read 2026-12-03). The caller passes no role to
    # EC2 (`iam:PassedToService` is EKS's only): the node role reaches the instances through
    # EKS's service-linked role.
    "eks:index:ManagedNodeGroup": TypeActions(
        _NODE_GROUP,
        "pulumi/pulumi-eks nodejs/eks/nodes/nodegroup.ts and " + _TF + "eks/node_group.go",
    ),
    # The same node group, created directly in a cluster the stack reads (`existingCluster`).
    "aws:eks/nodeGroup:NodeGroup": TypeActions(_NODE_GROUP, _TF + "eks/node_group.go"),
    # The AWS CLI's calls in components/target_groups.sh, as whoever runs `pulumi up`.
    "command:local:Command": TypeActions(
        (
            "elasticloadbalancing:DescribeLoadBalancers",
            "elasticloadbalancing:DescribeTargetGroups",
            "elasticloadbalancing:DescribeTargetGroupAttributes",
            "elasticloadbalancing:ModifyTargetGroupAttributes",
        ),
        "components/target_groups.sh (aws elbv2)",
    ),
    "kubernetes:apps/v1:Deployment": NO_AWS,
    "kubernetes:batch/v1:Job": NO_AWS,
    # Read only: a cluster's own LeaderWorkerSet CRD (`lwsInstalled`).
    "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition": NO_AWS,
    "kubernetes:core/v1:ConfigMap": NO_AWS,
    "kubernetes:core/v1:Namespace": NO_AWS,
    "kubernetes:core/v1:PersistentVolumeClaim": NO_AWS,
    "kubernetes:core/v1:PersistentVolume": NO_AWS,
    "kubernetes:core/v1:Secret": NO_AWS,
    "kubernetes:core/v1:Service": NO_AWS,
    "kubernetes:core/v1:ServiceAccount": NO_AWS,
    "kubernetes:helm.sh/v4:Chart": NO_AWS,
    "kubernetes:keda.sh/v1alpha1:ScaledObject": NO_AWS,
    "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet": NO_AWS,
    "kubernetes:networking.k8s.io/v1:NetworkPolicy": NO_AWS,
    "kubernetes:policy/v1:PodDisruptionBudget": NO_AWS,
    "kubernetes:rbac.authorization.k8s.io/v1:Role": NO_AWS,
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": NO_AWS,
    "kubernetes:scheduling.k8s.io/v1:PriorityClass": NO_AWS,
    "kubernetes:storage.k8s.io/v1:StorageClass": NO_AWS,
    "random:index/randomPassword:RandomPassword": NO_AWS,
    "time:index/sleep:Sleep": NO_AWS,
    "pulumi:providers:aws": NO_AWS,
    "pulumi:providers:kubernetes": NO_AWS,
}

#: The program's own components: they call nothing themselves; their children have rows.
COMPONENT_PREFIX = "gemma-graviton:"

INVOKE_ACTIONS: dict[str, TypeActions] = {
    "aws:index/getAvailabilityZones:getAvailabilityZones": TypeActions(
        ("ec2:Describe*",), _TF + "ec2/ec2_availability_zones_data_source.go"
    ),
    "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings": TypeActions(
        ("ec2:Describe*",), _TF + "ec2/ec2_instance_type_offerings_data_source.go"
    ),
    "aws:index/getPartition:getPartition": TypeActions((), "computed by the provider"),
    # The reads of a cluster the stack does not own (`infra.adapters.existing_cluster`).
    "aws:eks/getCluster:getCluster": TypeActions(
        ("eks:Describe*",), _TF + "eks/cluster_data_source.go"
    ),
    "aws:eks/getAddon:getAddon": TypeActions(("eks:Describe*",), _TF + "eks/addon_data_source.go"),
    "aws:ec2/getSubnet:getSubnet": TypeActions(
        ("ec2:Describe*",), _TF + "ec2/vpc_subnet_data_source.go"
    ),
    "aws:ec2/getRouteTables:getRouteTables": TypeActions(
        ("ec2:Describe*",), _TF + "ec2/vpc_route_tables_data_source.go"
    ),
    "aws:ec2/getRouteTable:getRouteTable": TypeActions(
        ("ec2:Describe*",), _TF + "ec2/vpc_route_table_data_source.go"
    ),
    "aws:ec2/getNatGateway:getNatGateway": TypeActions(
        ("ec2:Describe*",), _TF + "ec2/vpc_nat_gateway_data_source.go"
    ),
    "aws:ec2/getInstances:getInstances": TypeActions(
        ("ec2:Describe*",), _TF + "ec2/ec2_instances_data_source.go"
    ),
    "aws:ec2/getNetworkInterfaces:getNetworkInterfaces": TypeActions(
        ("ec2:Describe*",), _TF + "ec2/vpc_network_interfaces_data_source.go"
    ),
    "aws:ec2/getNetworkInterface:getNetworkInterface": TypeActions(
        ("ec2:Describe*",), _TF + "ec2/vpc_network_interface_data_source.go"
    ),
    "aws:iam/getRole:getRole": TypeActions(("iam:GetRole",), _TF + "iam/role_data_source.go"),
}


def needed_actions() -> tuple[str, ...]:
    """Every action of every row, once, sorted."""
    rows = [*RESOURCE_ACTIONS.values(), *INVOKE_ACTIONS.values()]
    return tuple(sorted({action for row in rows for action in row.actions}))


def missing_rows(types: set[str], invokes: set[str]) -> list[str]:
    """Registered types and invokes the table has no row for (components excepted)."""
    return sorted(
        [t for t in types if t not in RESOURCE_ACTIONS and not t.startswith(COMPONENT_PREFIX)]
        + [i for i in invokes if i not in INVOKE_ACTIONS]
    )
