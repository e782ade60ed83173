"""GitHub Actions' way into AWS: the account's GitHub OIDC provider, roles that only named
workflow subjects can assume, each with exactly one inline permission policy, and the managed
policies the roles' work must carry as permissions boundaries."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

#: GitHub's OIDC issuer (without scheme), the prefix of the trust conditions' keys.
GITHUB_OIDC_HOST = "token.actions.githubusercontent.com"
#: The audience `aws-actions/configure-aws-credentials` requests by default.
OIDC_AUDIENCE = "sts.amazonaws.com"


def github_trust_policy(provider_arn: str, subjects: Sequence[str]) -> dict[str, Any]:
    """Web-identity trust for GitHub tokens whose `sub` is one of `subjects`.

    StringEquals when every subject is exact. StringLike only for subjects that carry a
    wildcard, which the caller keeps to the part GitHub fills in per run (a pull request's ref):
    a wildcard over the repository or the environment (`repo:o/r:*`) would admit every branch
    and every environment of the repository.
    """
    operator = "StringLike" if any("*" in s or "?" in s for s in subjects) else "StringEquals"
    condition: dict[str, Any] = {"StringEquals": {f"{GITHUB_OIDC_HOST}:aud": OIDC_AUDIENCE}}
    condition.setdefault(operator, {})[f"{GITHUB_OIDC_HOST}:sub"] = list(subjects)
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "GitHubActionsOfTheseSubjectsOnly",
                "Effect": "Allow",
                "Principal": {"Federated": provider_arn},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": condition,
            }
        ],
    }


@dataclass(frozen=True, kw_only=True)
class GitHubRoleSpec:
    """One role for GitHub Actions."""

    #: Suffix of the role's logical name (`<component>-<key>`) and key of `role_arns`.
    key: str
    #: Exact `sub` claims admitted, e.g. `repo:owner/name:environment:prod`.
    subjects: Sequence[str]
    #: The permission policy document (a JSON-able mapping); the role gets nothing else.
    policy: dict[str, Any]
    #: Shown in IAM.
    description: str
    #: The longest session a job may request (3600 to 43200 seconds).
    max_session_seconds: int = 3600


@dataclass(frozen=True)
class BoundarySpec:
    """A managed policy that another program sets as its roles' permissions boundary."""

    #: Key of `boundary_arns` (the stack whose roles carry it).
    key: str
    #: Its physical name: the roles' policies name it, so it is fixed, not auto-named.
    name: str
    #: The policy document (a JSON-able mapping).
    document: dict[str, Any]
    #: Shown in IAM.
    description: str


@dataclass(frozen=True)
class GitHubActionsAccessArgs:
    """The roles to create, and whether the account's GitHub OIDC provider exists already."""

    #: Every role, each trusted by its own subjects only.
    roles: Sequence[GitHubRoleSpec]
    #: ARN of an existing provider for the GitHub issuer (an account holds one per issuer);
    #: `None` creates it.
    existing_provider_arn: str | None = None
    #: IAM path of the roles and boundaries, so policies elsewhere can name them all
    #: (`role/<path>*`, `policy/<path>*`).
    role_path: str = "/github-ci/"
    #: Permissions boundaries to create under `role_path`.
    boundaries: Sequence[BoundarySpec] = ()


class GitHubActionsAccess(pulumi.ComponentResource):
    """The GitHub OIDC provider (created or reused) and one role per `GitHubRoleSpec`."""

    provider_arn: pulumi.Output[str]
    """ARN of the GitHub OIDC provider the roles trust."""
    role_arns: dict[str, pulumi.Output[str]]
    """Role ARN by `GitHubRoleSpec.key`."""
    boundary_arns: dict[str, pulumi.Output[str]]
    """Boundary policy ARN by `BoundarySpec.key`."""

    def __init__(
        self, name: str, args: GitHubActionsAccessArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma-graviton:ci:GitHubActionsAccess", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        if args.existing_provider_arn:
            provider_arn: pulumi.Output[str] = pulumi.Output.from_input(args.existing_provider_arn)
        else:
            # No thumbprint: for GitHub's issuer IAM validates against its own trusted CAs and
            # ignores any thumbprint (pulumi-aws 7.51.1, iam/open_id_connect_provider.py).
            provider = aws.iam.OpenIdConnectProvider(
                f"{name}-github",
                url=f"https://{GITHUB_OIDC_HOST}",
                client_id_lists=[OIDC_AUDIENCE],
                opts=child,
            )
            provider_arn = provider.arn

        self.role_arns = {}
        for spec in args.roles:
            subjects = list(spec.subjects)
            role = aws.iam.Role(
                f"{name}-{spec.key}",
                path=args.role_path,
                description=spec.description,
                max_session_duration=spec.max_session_seconds,
                assume_role_policy=provider_arn.apply(
                    lambda arn, subjects=subjects: json.dumps(github_trust_policy(arn, subjects))
                ),
                opts=child,
            )
            aws.iam.RolePolicy(
                f"{name}-{spec.key}-permissions",
                role=role.id,
                policy=json.dumps(spec.policy),
                opts=child,
            )
            self.role_arns[spec.key] = role.arn

        self.boundary_arns = {
            spec.key: aws.iam.Policy(
                f"{name}-boundary-{spec.key}",
                name=spec.name,
                path=args.role_path,
                description=spec.description,
                policy=json.dumps(spec.document),
                opts=child,
            ).arn
            for spec in args.boundaries
        }

        self.provider_arn = provider_arn
        self.register_outputs(
            {
                "providerArn": self.provider_arn,
                "roleArns": self.role_arns,
                "boundaryArns": self.boundary_arns,
            }
        )
