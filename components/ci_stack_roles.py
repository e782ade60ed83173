"""The bootstrap's `StackRoles` component: the roles of one main-program stack, which the
program only reads (`stack_roles`). Who assumes each role: `components.manifests.identity`; what
it holds: `components.manifests.role_policies` (both pure).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.manifests.identity import StackRole, role_name
from components.manifests.role_policies import RolePolicies


@dataclass(frozen=True)
class StackRolesArgs:
    """One stack's roles, as the bootstrap creates them."""

    stack: str
    roles: Sequence[StackRole]
    #: What each holds, by `StackRole.key` (`role_policies.policies`).
    policies: Mapping[str, RolePolicies]
    #: The IAM path of every role (`infra.plan.iam.role_path`).
    path: str
    #: The stack's permissions boundary (a managed policy of the bootstrap).
    boundary_arn: pulumi.Input[str]
    account: pulumi.Input[str]
    partition: pulumi.Input[str]
    region: str


class StackRoles(pulumi.ComponentResource):
    """The roles of one main-program stack, with their managed and inline policies."""

    role_arns: dict[str, pulumi.Output[str]]
    """Role ARN by `StackRole.key`."""

    def __init__(
        self, name: str, args: StackRolesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma-graviton:ci:StackRoles", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.role_arns = {}
        for spec in args.roles:
            held = args.policies[spec.key]
            trust = pulumi.Output.all(args.account, args.partition).apply(
                lambda v, spec=spec: json.dumps(spec.trust(v[0], v[1], args.region, args.stack))
            )
            role = aws.iam.Role(
                f"{name}-{spec.key}",
                name=role_name(args.stack, spec.key),
                path=args.path,
                description=held.description,
                permissions_boundary=args.boundary_arn,
                assume_role_policy=trust,
                opts=child,
            )
            for policy in held.managed_policies:
                aws.iam.RolePolicyAttachment(
                    f"{name}-{spec.key}-{policy.rsplit('/', 1)[-1]}",
                    role=role.name,
                    policy_arn=pulumi.Output.concat(
                        "arn:", args.partition, ":iam::aws:policy/", policy
                    ),
                    opts=child,
                )
            if held.inline_policy is not None:
                aws.iam.RolePolicy(
                    f"{name}-{spec.key}-policy",
                    role=role.name,
                    policy=held.inline_policy,
                    opts=child,
                )
            self.role_arns[spec.key] = role.arn
        self.register_outputs({"roleArns": self.role_arns})
