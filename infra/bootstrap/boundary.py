"""The permissions boundary of a stack's roles: what the cluster's, the nodes' and the pods'
roles may ever do, whatever policies they hold. The bootstrap creates one per main-program stack,
under the CI's IAM path, and attaches it to each of that stack's roles
(`components.manifests.identity.stack_roles`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.bootstrap.access import in_region
from infra.plan import iam

#: What a stack's roles may ever do (a boundary grants nothing; a role's permissions are its
#: policies within it): the AWS-managed policies and the inline policies of
#: `components.manifests.role_policies.policies` use EC2, Elastic Load
#: Balancing, Auto Scaling, EKS reads, ECR pulls, CloudWatch Logs and metrics, X-Ray and KMS key
#: reads. No IAM but the load balancers' service-linked role, no STS, no S3, no secrets.
BOUNDARY_REGIONAL_ACTIONS = (
    "autoscaling:*",
    "cloudwatch:PutMetricData",
    "ec2:*",
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:DescribeImages",
    "ecr:DescribeRepositories",
    "ecr:GetAuthorizationToken",
    "ecr:GetDownloadUrlForLayer",
    "ecr:ListImages",
    "eks:DescribeCluster",
    "eks:DescribeNodegroup",
    "eks:ListNodegroups",
    "eks-auth:AssumeRoleForPodIdentity",
    "elasticloadbalancing:*",
    "kms:DescribeKey",
    "logs:*",
    "ssm:GetParameter",
    "xray:GetSamplingRules",
    "xray:GetSamplingStatisticSummaries",
    "xray:GetSamplingTargets",
    "xray:PutTelemetryRecords",
    "xray:PutTraceSegments",
)

#: Actions inside those wildcards that no program role uses and that would hand the stack's
#: data, network or machines to someone else: sharing snapshots, images, network interfaces,
#: endpoint services and log groups with other accounts; launching, stopping, starting
#: instances or rewriting launch templates (node groups launch through EKS's and Auto
#: Scaling's service-linked roles, from the program's own template).
BOUNDARY_DENIED = (
    "ec2:CreateLaunchTemplateVersion",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:ModifyFpgaImageAttribute",
    "ec2:ModifyImageAttribute",
    "ec2:ModifyLaunchTemplate",
    "ec2:ModifySnapshotAttribute",
    "ec2:ModifyVpcEndpointServicePermissions",
    "ec2:ResetSnapshotAttribute",
    "ec2:RunInstances",
    "ec2:StartInstances",
    "ec2:StopInstances",
    "logs:DeleteResourcePolicy",
    "logs:PutResourcePolicy",
)


def boundary_policy(region: str) -> dict[str, Any]:
    """The permissions boundary of every role a stack in `region` creates."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "TheClustersWorkInTheStackRegion",
                "Effect": "Allow",
                "Action": list(BOUNDARY_REGIONAL_ACTIONS),
                "Resource": ["*"],
                "Condition": in_region(region),
            },
            {
                # AmazonEKSClusterPolicy's one IAM action: the load balancers' own role.
                "Sid": "TheLoadBalancersServiceLinkedRole",
                "Effect": "Allow",
                "Action": ["iam:CreateServiceLinkedRole"],
                "Resource": ["arn:aws:iam::*:role/aws-service-role/*"],
                "Condition": {
                    "StringEquals": {"iam:AWSServiceName": ["elasticloadbalancing.amazonaws.com"]}
                },
            },
            {
                "Sid": "NeverShareOrLaunch",
                "Effect": "Deny",
                "Action": list(BOUNDARY_DENIED),
                "Resource": ["*"],
            },
        ],
    }


@dataclass(frozen=True)
class Boundary:
    """The permissions boundary of one main-program stack's roles."""

    stack: str
    name: str
    document: dict[str, Any]


def boundaries(regions: Mapping[str, str]) -> tuple[Boundary, ...]:
    """One boundary per stack of `regions` (every stack file's), named as the deploy roles'
    conditions expect (`infra.plan.iam.boundary_name`), for the stack's region."""
    return tuple(
        Boundary(stack, iam.boundary_name(stack), boundary_policy(regions[stack]))
        for stack in sorted(regions)
    )
