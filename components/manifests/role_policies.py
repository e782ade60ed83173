"""What each IAM role of a main-program stack holds, for the bootstrap that creates it
(`components.ci_stack_roles`): its managed and inline policies (`policies`). Who assumes each
role, and its trust: `components.manifests.identity`, which the program reads the roles by.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from components.manifests.identity import cluster_name, metrics_log_group

#: The autoscaler's policy: the README's "Full Cluster Autoscaler Features Policy", the writes
#: limited to Auto Scaling groups tagged for this cluster (README, "Minimal IAM Permissions
#: Policy" and the tag conditions it links to).
_READS = (
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
    "eks:DescribeNodegroup",
)
_WRITES = ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup")


def autoscaler_policy(cluster_name: str) -> str:
    """The autoscaler's IAM policy document for `cluster_name`."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": list(_READS), "Resource": "*"},
                {
                    "Effect": "Allow",
                    "Action": list(_WRITES),
                    "Resource": "*",
                    "Condition": {
                        "StringEquals": {
                            f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"
                        }
                    },
                },
            ],
        },
        sort_keys=True,
    )


def emf_policy(log_group_arn: str) -> str:
    """The collector's IAM policy: least privilege, the EMF exporter writes log events to its
    own group, nothing else (CloudWatch makes the metrics from the events; no PutMetricData is
    needed)."""
    group = log_group_arn.removesuffix(":*")
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": [
                        "logs:CreateLogStream",
                        "logs:DescribeLogStreams",
                        "logs:PutLogEvents",
                    ],
                    "Resource": [group, f"{group}:*"],
                }
            ],
        }
    )


#: The AWS-managed policy of the cluster's service role, the one pulumi-eks 4.x would attach to
#: the role it creates when given none (nodejs/eks/cluster/cluster.ts `createCore`, master at
#: 7bf0c1b read 2026-12-03).
CLUSTER_POLICY = "AmazonEKSClusterPolicy"
#: The only AWS-managed policies on the node role; the pods that call AWS have roles of their
#: own. AmazonEKSWorkerNodePolicy holds `eks-auth:AssumeRoleForPodIdentity`, with which the
#: nodes' Pod Identity agent fetches the pods' credentials (EKS User Guide, pod-id-agent-setup,
#: "Agent permissions", read 2026-12-03).
NODE_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
)


def partition_of(region: str) -> str:
    """The AWS partition of `region` (AWS General Reference, "Amazon Resource Names", partition:
    aws, aws-cn for China, aws-us-gov for GovCloud, read 2026-12-03)."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


@dataclass(frozen=True)
class RolePolicies:
    """What one role of a stack holds (`identity.StackRole`: who assumes it)."""

    description: str
    #: AWS-managed policies, by path and name below `arn:<partition>:iam::aws:policy/`.
    managed_policies: tuple[str, ...] = ()
    #: Its one inline policy (JSON), if any.
    inline_policy: str | None = None


def policies(stack: str, region: str) -> dict[str, RolePolicies]:
    """What each role of `stack` in `region` holds, by `StackRole.key`.

    The collector's log group ARN names any account: a role writes only its own account's logs
    (CloudWatch Logs takes no resource policy for PutLogEvents)."""
    logs = f"arn:{partition_of(region)}:logs:{region}:*:log-group:{metrics_log_group(stack)}"
    return {
        "cluster": RolePolicies(f"EKS control plane of the {stack} stack", (CLUSTER_POLICY,)),
        "nodes": RolePolicies(f"EKS managed nodes of the {stack} stack", NODE_POLICIES),
        "ebs-csi": RolePolicies(
            f"EBS CSI controller of the {stack} stack", ("service-role/AmazonEBSCSIDriverPolicy",)
        ),
        "cloudwatch-agent": RolePolicies(
            f"CloudWatch agent of the {stack} stack", ("CloudWatchAgentServerPolicy",)
        ),
        "autoscaler": RolePolicies(
            f"Cluster Autoscaler of the {stack} stack",
            inline_policy=autoscaler_policy(cluster_name(stack)),
        ),
        "collector": RolePolicies(
            f"Metrics collector of the {stack} stack", inline_policy=emf_policy(logs)
        ),
    }
