"""Every IAM role of a main-program stack: who assumes it, for the bootstrap and the program.

The program's `pulumi up` creates no IAM role, policy or identity provider. The bootstrap (run
once by an account admin, `infra/bootstrap/`) creates each stack's roles from `stack_roles`,
with what each holds (`components.manifests.role_policies`, the bootstrap's only), under the
stack's path with its permissions boundary; the program looks them up by name
(`existing_roles`) and passes them on: the cluster's service role to EKS, the node role to the
node groups, and the pods' roles to EKS Pod Identity, which maps a service account to a role
in EKS's own API (no OIDC provider, whose issuer exists only once the cluster does, and no
trust that follows it). So a deploy role needs no IAM write: it reads these roles and passes
them to EKS, nothing else (`infra/bootstrap/access.py`).

A pod role's trust admits EKS Pod Identity for this stack's cluster and the role's own service
account only: the session tags EKS Pod Identity sets on every session (`eks-cluster-arn`,
`kubernetes-namespace`, `kubernetes-service-account`) must name them, so an association of the
role with another service account, or in another cluster, gets no credentials (EKS User Guide,
"Create IAM role with trust policy required by EKS Pod Identity" and "Grant Pods access to AWS
resources based on tags", docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html and
pod-id-abac.html, read 2026-12-03: the tags "in the condition keys in the trust policy to
restrict which service accounts, namespaces, and clusters can use this role").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

PROJECT = "gemma-graviton"

#: The service accounts whose pods call AWS, each with a role of its own below.
AUTOSCALER_NAMESPACE = "kube-system"
AUTOSCALER_SERVICE_ACCOUNT = "cluster-autoscaler"
#: The EBS CSI driver's controller, the one part of it that calls AWS (the add-on's own name).
CONTROLLER_NAMESPACE = "kube-system"
CONTROLLER_SERVICE_ACCOUNT = "ebs-csi-controller-sa"
#: The CloudWatch Observability add-on's agent.
AGENT_NAMESPACE = "amazon-cloudwatch"
AGENT_SERVICE_ACCOUNT = "cloudwatch-agent"
#: The metrics collector's service account (and its Deployment's name, `manifests.metrics`).
COLLECTOR_NAME = "metrics-collector"

#: The principal EKS Pod Identity assumes a pod's role as, and the two actions its trust must
#: allow (EKS User Guide, pod-id-role.html, read 2026-12-03).
POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"
POD_IDENTITY_ACTIONS = ("sts:AssumeRole", "sts:TagSession")


def cluster_name(stack: str, existing: str | None = None) -> str:
    """The EKS cluster's name: fixed, so that the bootstrap can fence the pods' roles to it;
    `existing` (the stack's `existingCluster`) when the stack deploys into a cluster it reads."""
    return existing or f"{PROJECT}-{stack}"


def metrics_log_group(stack: str) -> str:
    """The log group the metrics collector writes its EMF events to."""
    return f"/{PROJECT}/{stack}/metrics"


def role_name(stack: str, key: str) -> str:
    """A stack role's name (at most 64 characters, IAM's limit)."""
    return f"{PROJECT}-{stack}-{key}"


@dataclass(frozen=True)
class ServiceAccount:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class StackRole:
    """One role of a stack: who assumes it (what it holds: `role_policies`)."""

    #: Suffix of its name (`role_name`) and key of the bootstrap's `stackRoleArns`.
    key: str
    #: The service principal that assumes it (`eks.amazonaws.com`, `ec2.amazonaws.com`,
    #: `pods.eks.amazonaws.com`).
    principal: str
    #: The service account of a pod role (Pod Identity), None for the others.
    service_account: ServiceAccount | None = None
    #: The cluster a pod role's trust names: None for the stack's own (`cluster_name`).
    cluster: str | None = None

    def trust(self, account: str, partition: str, region: str, stack: str) -> dict[str, Any]:
        """The role's trust policy."""
        statement: dict[str, Any] = {
            "Effect": "Allow",
            "Principal": {"Service": self.principal},
            # EKS's service role as pulumi-eks's own (nodejs/eks/cluster/cluster.ts
            # `assumeRoleActions`); EC2's instance profile role assumes with sts:AssumeRole alone.
            "Action": ["sts:AssumeRole"]
            if self.principal == "ec2.amazonaws.com"
            else list(POD_IDENTITY_ACTIONS),
        }
        if self.service_account is not None:
            name = cluster_name(stack, self.cluster)
            cluster = f"arn:{partition}:eks:{region}:{account}:cluster/{name}"
            statement["Condition"] = {
                "StringEquals": {
                    "aws:RequestTag/eks-cluster-arn": cluster,
                    "aws:RequestTag/kubernetes-namespace": self.service_account.namespace,
                    "aws:RequestTag/kubernetes-service-account": self.service_account.name,
                }
            }
        return {"Version": "2012-10-17", "Statement": [statement]}


def stack_roles(app_namespace: str, existing_cluster: str | None = None) -> tuple[StackRole, ...]:
    """The roles of a stack, the pods' roles for whichever option uses them (the autoscaler on
    elastic stacks, the volume driver with `modelCache` volume) too: an unused role costs
    nothing, and a stack can turn an option on without another bootstrap.

    With `existing_cluster` (the stack's `existingCluster`) the pods' roles trust that cluster,
    and the stack has no cluster role (it creates no cluster) and no autoscaler role (it is
    never elastic there, and the cluster's own autoscaler may run as the same account)."""
    roles = (
        StackRole("cluster", "eks.amazonaws.com"),
        StackRole("nodes", "ec2.amazonaws.com"),
        StackRole(
            "ebs-csi",
            POD_IDENTITY_PRINCIPAL,
            ServiceAccount(CONTROLLER_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT),
        ),
        StackRole(
            "cloudwatch-agent",
            POD_IDENTITY_PRINCIPAL,
            ServiceAccount(AGENT_NAMESPACE, AGENT_SERVICE_ACCOUNT),
        ),
        StackRole(
            "autoscaler",
            POD_IDENTITY_PRINCIPAL,
            ServiceAccount(AUTOSCALER_NAMESPACE, AUTOSCALER_SERVICE_ACCOUNT),
        ),
        StackRole(
            "collector", POD_IDENTITY_PRINCIPAL, ServiceAccount(app_namespace, COLLECTOR_NAME)
        ),
    )
    if existing_cluster is None:
        return roles
    return tuple(
        replace(role, cluster=existing_cluster)
        for role in roles
        if role.key not in ("cluster", "autoscaler")
    )
