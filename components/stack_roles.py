"""The program's look-up of the stack's roles, which the bootstrap made (`ci_stack_roles`).

What each role is: `components.manifests.identity` (pure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_aws as aws

from components.manifests.identity import StackRole, role_name


def existing_roles(
    name: str, stack: str, keys: Sequence[str], opts: pulumi.ResourceOptions
) -> dict[str, aws.iam.Role]:
    """The bootstrap's roles of `stack`, read by name: a stack whose bootstrap has not run fails
    its first preview on the first missing role, before anything is created."""
    return {
        key: aws.iam.Role.get(f"{name}-{key}", id=role_name(stack, key), opts=opts) for key in keys
    }


def pod_role_arns(
    roles: Sequence[StackRole], found: Mapping[str, aws.iam.Role]
) -> dict[str, pulumi.Output[str]]:
    """Service account (`namespace/name`) -> the ARN of its role, for every pod role."""
    return {
        str(spec.service_account): found[spec.key].arn
        for spec in roles
        if spec.service_account is not None
    }
