"""EKS add-ons whose controllers call AWS: each with the bootstrap's IAM role for its service
account, through EKS Pod Identity (pods cannot reach the node role, see the cluster; the roles
are `components.stack_roles`')."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumiverse_time

#: The pod-template annotation that carries the id of the association a workload's credentials
#: come from. EKS replaces an association only with a new cluster, namespace or service account
#: (UpdatePodIdentityAssociation changes the role alone, and a pod's credentials' address does
#: not name the role); the new id then changes the pod template, so the pods are created again,
#: after the new association's wait, and EKS's webhook admits them with credentials.
ASSOCIATION_ANNOTATION = "gemma-graviton.dev/pod-identity-association"
#: How long a workload waits after its association is created or replaced. No bound is
#: published: the EKS API reference, CreatePodIdentityAssociation, says associations "are
#: eventually consistent, and may take several seconds to be effective" (read 2026-12-06);
#: aws/eks-pod-identity-agent#52 (2025-02) saw pods created right after the association left
#: unmutated and a 5-10 s wait enough; aws/containers-roadmap#2507 (open, read 2026-12-06) asks
#: for an API that says when an association is ready, and has none. Twelve times the longest
#: wait reported; on a first `up` it runs beside the node group's creation, which the workloads
#: wait for too, so it costs time only when an association is replaced.
ASSOCIATION_SETTLE = "120s"


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


@dataclass(frozen=True)
class PodIdentity:
    """A service account's association, and the wait its workload comes after."""

    association: aws.eks.PodIdentityAssociation
    #: Ends `ASSOCIATION_SETTLE` after the association is created, and again after each
    #: replacement (its trigger is the association's id).
    settled: pulumiverse_time.Sleep

    def pod_annotations(self) -> dict[str, pulumi.Output[str]]:
        """The roll key for a workload's pod template: the association's id, read from the wait,
        so the workload depends on the wait (and is created or rolled after it ends)."""
        key = self.settled.triggers.apply(lambda triggers: (triggers or {})["associationId"])
        return {ASSOCIATION_ANNOTATION: key}


def pod_identity(
    name: str,
    cluster: ClusterRef,
    *,
    namespace: str,
    service_account: str,
    parent: pulumi.Resource,
) -> PodIdentity:
    """`namespace/service_account` mapped to its role by EKS Pod Identity, and the wait after
    it. A pod must be created after the association is effective: EKS's webhook gives a pod its
    credentials' address only when it admits the pod (EKS User Guide, pod-id-association.html,
    read 2026-12-03), and a pod admitted without it never gets one (aws/eks-pod-identity-agent#52,
    aws/containers-roadmap#2507), and an association is not yet effective when
    CreatePodIdentityAssociation returns (`ASSOCIATION_SETTLE`).
    Standalone, also for the EKS add-ons: an add-on's own `podIdentityAssociations` are accepted
    only for the versions and service accounts its published configuration declares, and
    refused at CreateAddon otherwise ("Pod Identity feature is not supported for addon
    version", terraform-aws-modules/terraform-aws-eks#3520, read 2026-12-03)."""
    association = aws.eks.PodIdentityAssociation(
        name,
        cluster_name=cluster.cluster_name,
        namespace=namespace,
        service_account=service_account,
        role_arn=cluster.pod_role(namespace, service_account),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    # pulumiverse-time's Sleep (terraform-provider-time `time_sleep`): a changed trigger
    # replaces it, and its creation waits `create_duration`.
    settled = pulumiverse_time.Sleep(
        f"{name}-settled",
        create_duration=ASSOCIATION_SETTLE,
        triggers={"associationId": association.association_id},
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return PodIdentity(association, settled)


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
    `namespace/service_account` with that account's role (`pod_identity`: the add-on is created
    after the association's wait), configured with `configuration` (the add-on's configuration
    values, JSON-encoded). No roll key: EKS makes the add-on's pods, and its association is
    replaced only with a new cluster (the namespace and account are the add-on's own), which
    replaces the add-on too, after the new wait."""
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
                identity.settled,
                *([cluster.nodes] if cluster.nodes is not None else []),
                *cluster.after_identity(),
            ],
        ),
    )
