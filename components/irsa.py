"""An IAM role that one Kubernetes service account assumes through the cluster's OIDC provider."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pulumi
import pulumi_aws as aws


def service_account_role(
    name: str,
    *,
    oidc_provider_arn: pulumi.Input[str],
    oidc_provider_url: pulumi.Input[str],
    namespace: str,
    service_account: str,
    managed_policy_arns: Sequence[str],
    parent: pulumi.Resource,
) -> aws.iam.Role:
    """A role only `namespace/service_account` can assume, with exactly `managed_policy_arns`."""

    def trust(args: list[str]) -> str:
        arn, url = args
        issuer = url.removeprefix("https://")
        return json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"Federated": arn},
                        "Action": "sts:AssumeRoleWithWebIdentity",
                        "Condition": {
                            "StringEquals": {
                                f"{issuer}:sub": (
                                    f"system:serviceaccount:{namespace}:{service_account}"
                                ),
                                f"{issuer}:aud": "sts.amazonaws.com",
                            }
                        },
                    }
                ],
            }
        )

    child = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(
        name,
        assume_role_policy=pulumi.Output.all(oidc_provider_arn, oidc_provider_url).apply(trust),
        opts=child,
    )
    for index, policy in enumerate(managed_policy_arns):
        aws.iam.RolePolicyAttachment(
            f"{name}-policy-{index}", role=role.name, policy_arn=policy, opts=child
        )
    return role
