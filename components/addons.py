"""EKS add-ons whose controllers call AWS: each with the bootstrap's IAM role for its service
account, through EKS Pod Identity (pods cannot reach the node role, see the cluster; the roles
are `components.stack_roles`')."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws


@dataclass(frozen=True)
class ClusterRef:
    """The cluster an add-on goes into, and the roles its pods get through EKS Pod Identity."""

    #: The EKS cluster's name.
    cluster_name: pulumi.Input[str]
    #: Pinned Kubernetes version.
    kubernetes_version: str
    #: Service account (`namespace/name`) -> the ARN of the bootstrap's role for it
    #: (`components.stack_roles.pod_role_arns`).
    pod_roles: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    #: The EKS Pod Identity agent add-on: a pod that calls AWS at start must come after it, or
    #: its first calls find no agent to give it credentials.
    identity_agent: pulumi.Resource | None = None
    #: The node group: an add-on whose pods have nowhere to run never turns ACTIVE, and on
    #: destroy it must go before the nodes (the CSI controller deletes volumes, the agent ships
    #: the last logs).
    nodes: pulumi.Resource | None = None
    #: Add-on name -> pinned version for `kubernetes_version` (the plan's catalogue,
    #: `infra/plan/addons.py`); nothing is resolved at deploy time.
    addon_versions: Mapping[str, str] = field(default_factory=dict)

    def version_of(self, addon: str) -> str:
        """The pinned version of `addon`; an add-on without a pin is a programming error."""
        if addon not in self.addon_versions:
            raise ValueError(
                f"no pinned version of the {addon} add-on for Kubernetes "
                f"{self.kubernetes_version}; add it to infra/plan/addons.py"
            )
        return self.addon_versions[addon]

    def pod_role(self, namespace: str, service_account: str) -> pulumi.Input[str]:
        """The ARN of the role of `namespace/service_account`; a pod that calls AWS without a
        role in `components.stack_roles` is a programming error."""
        key = f"{namespace}/{service_account}"
        if key not in self.pod_roles:
            raise ValueError(f"no role for the service account {key}: add it to stack_roles")
        return self.pod_roles[key]

    def after_identity(self) -> list[pulumi.Resource]:
        """What a pod that calls AWS at start waits for: the Pod Identity agent."""
        return [self.identity_agent] if self.identity_agent is not None else []


def pod_identity(
    name: str,
    cluster: ClusterRef,
    *,
    namespace: str,
    service_account: str,
    parent: pulumi.Resource,
) -> aws.eks.PodIdentityAssociation:
    """`namespace/service_account` mapped to its role by EKS Pod Identity. A pod must come after
    it: EKS's webhook gives a pod its credentials' address only when it creates the pod (EKS
    User Guide, pod-id-association.html, read 2026-12-03). Standalone, also for the EKS
    add-ons: an add-on's own `podIdentityAssociations` are accepted only for the versions and
    service accounts its published configuration declares, and refused at CreateAddon
    otherwise ("Pod Identity feature is not supported for addon version",
    terraform-aws-modules/terraform-aws-eks#3520, read 2026-12-03)."""
    return aws.eks.PodIdentityAssociation(
        name,
        cluster_name=cluster.cluster_name,
        namespace=namespace,
        service_account=service_account,
        role_arn=cluster.pod_role(namespace, service_account),
        opts=pulumi.ResourceOptions(parent=parent),
    )


def addon_with_role(
    name: str,
    cluster: ClusterRef,
    *,
    addon: str,
    namespace: str,
    service_account: str,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource] = (),
    configuration: Mapping[str, object] | None = None,
) -> aws.eks.Addon:
    """The add-on `addon` at its pinned version, its controller running as
    `namespace/service_account` with that account's role (`pod_identity`, created before the
    add-on's pods), configured with `configuration` (the add-on's configuration values,
    JSON-encoded)."""
    identity = pod_identity(
        f"{name}-identity",
        cluster,
        namespace=namespace,
        service_account=service_account,
        parent=parent,
    )
    return aws.eks.Addon(
        name,
        cluster_name=cluster.cluster_name,
        addon_name=addon,
        addon_version=cluster.version_of(addon),
        configuration_values=json.dumps(configuration, sort_keys=True) if configuration else None,
        resolve_conflicts_on_create="OVERWRITE",
        resolve_conflicts_on_update="OVERWRITE",
        opts=pulumi.ResourceOptions(
            parent=parent,
            depends_on=[
                *depends_on,
                identity,
                *([cluster.nodes] if cluster.nodes is not None else []),
                *cluster.after_identity(),
            ],
        ),
    )
