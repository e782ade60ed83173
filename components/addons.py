"""EKS add-ons whose controllers call AWS: each with an IAM role that only its service account can
assume through the cluster's OIDC provider (pods cannot reach the node role, see the cluster)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws


@dataclass(frozen=True)
class IamScope:
    """Where the roles a component creates live, and the ceiling they carry.

    A deploy role may create, change and pass only the roles under its stack's path, and create
    or change one only while it carries the stack's boundary (`infra/bootstrap/access.py`).
    """

    #: IAM path of every role (`/<project>/<stack>/`); part of the role's ARN.
    path: str = "/"
    #: ARN of the managed policy set as every role's permissions boundary, or `None` for none.
    permissions_boundary: pulumi.Input[str] | None = None


@dataclass(frozen=True)
class ClusterRef:
    """The cluster an add-on goes into, and the OIDC provider its role trusts."""

    #: The EKS cluster's name.
    cluster_name: pulumi.Input[str]
    #: Pinned Kubernetes version.
    kubernetes_version: str
    #: ARN of the cluster's IAM OIDC provider (the role's federated principal).
    oidc_provider_arn: pulumi.Input[str]
    #: Issuer URL of that provider (the condition keys' prefix).
    oidc_provider_url: pulumi.Input[str]
    #: The node group: an add-on whose pods have nowhere to run never turns ACTIVE, and on
    #: destroy it must go before the nodes (the CSI controller deletes volumes, the agent ships
    #: the last logs).
    nodes: pulumi.Resource | None = None
    #: Add-on name -> pinned version for `kubernetes_version` (the plan's catalogue,
    #: `infra/plan/addons.py`); nothing is resolved at deploy time.
    addon_versions: Mapping[str, str] = field(default_factory=dict)
    #: Path and boundary of the add-ons' roles.
    iam: IamScope = field(default_factory=IamScope)

    def version_of(self, addon: str) -> str:
        """The pinned version of `addon`; an add-on without a pin is a programming error."""
        if addon not in self.addon_versions:
            raise ValueError(
                f"no pinned version of the {addon} add-on for Kubernetes "
                f"{self.kubernetes_version}; add it to infra/plan/addons.py"
            )
        return self.addon_versions[addon]


def aws_managed_policy(policy: str, parent: pulumi.Resource) -> pulumi.Output[str]:
    """The ARN of an AWS-managed policy (`service-role/...` paths included) in the partition the
    provider works in (aws, aws-cn, aws-us-gov), not a hard-coded `arn:aws:`."""
    partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=parent))
    return pulumi.Output.concat("arn:", partition.partition, ":iam::aws:policy/", policy)


def service_account_role(
    name: str,
    *,
    oidc_provider_arn: pulumi.Input[str],
    oidc_provider_url: pulumi.Input[str],
    namespace: str,
    service_account: str,
    managed_policy_arns: Sequence[pulumi.Input[str]],
    iam: IamScope,
    parent: pulumi.Resource,
    replace_on_new_trust: bool = True,
) -> aws.iam.Role:
    """A role only `namespace/service_account` can assume, with exactly `managed_policy_arns`,
    under `iam`'s path and boundary.

    The deploy role may not rewrite a trust in place (iam:UpdateAssumeRolePolicy,
    infra/bootstrap/permissions.py). With `replace_on_new_trust` a changed trust (a new OIDC
    issuer, or an edit of `trust`) replaces the role: a new name, created before the old one is
    deleted; its pods must name the role in their template (`ROLE_ANNOTATION`) so that they roll
    onto it. Without it a changed trust fails `pulumi up` with AccessDenied and leaves the role
    and its pods as they were."""

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
        path=iam.path,
        permissions_boundary=iam.permissions_boundary,
        assume_role_policy=pulumi.Output.all(oidc_provider_arn, oidc_provider_url).apply(trust),
        opts=pulumi.ResourceOptions(
            parent=parent,
            replace_on_changes=["assumeRolePolicy"] if replace_on_new_trust else None,
        ),
    )
    for index, policy in enumerate(managed_policy_arns):
        aws.iam.RolePolicyAttachment(
            f"{name}-policy-{index}", role=role.name, policy_arn=policy, opts=child
        )
    return role


def addon_with_role(
    name: str,
    cluster: ClusterRef,
    *,
    addon: str,
    namespace: str,
    service_account: str,
    managed_policy_arns: Sequence[pulumi.Input[str]],
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource] = (),
    configuration: Mapping[str, object] | None = None,
) -> aws.eks.Addon:
    """The add-on `addon` at its pinned version, its controller running as
    `namespace/service_account` with a role that holds exactly `managed_policy_arns`, configured
    with `configuration` (the add-on's configuration values, JSON-encoded)."""
    role = service_account_role(
        f"{name}-role",
        oidc_provider_arn=cluster.oidc_provider_arn,
        oidc_provider_url=cluster.oidc_provider_url,
        namespace=namespace,
        service_account=service_account,
        managed_policy_arns=managed_policy_arns,
        iam=cluster.iam,
        parent=parent,
        # An EKS add-on's pods keep the role they started with when its role changes (the EBS
        # CSI driver's docs: restart the controller after changing its role), and their
        # templates are EKS's: a new trust is refused rather than a role swapped under them.
        replace_on_new_trust=False,
    )
    return aws.eks.Addon(
        name,
        cluster_name=cluster.cluster_name,
        addon_name=addon,
        addon_version=cluster.version_of(addon),
        service_account_role_arn=role.arn,
        configuration_values=json.dumps(configuration, sort_keys=True) if configuration else None,
        resolve_conflicts_on_create="OVERWRITE",
        resolve_conflicts_on_update="OVERWRITE",
        opts=pulumi.ResourceOptions(
            parent=parent,
            depends_on=[*depends_on, *([cluster.nodes] if cluster.nodes is not None else [])],
        ),
    )
