"""Every IAM role of a main-program stack: what each is, for the bootstrap and the program.

The program's `pulumi up` creates no IAM role, policy or identity provider. The bootstrap (run
once by an account admin, `infra/bootstrap/`) creates each stack's roles from `stack_roles`,
under the stack's path with its permissions boundary; the program looks them up by name
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

import json
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


#: The principal EKS Pod Identity assumes a pod's role as, and the two actions its trust must
#: allow (EKS User Guide, pod-id-role.html, read 2026-12-03).
POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"
POD_IDENTITY_ACTIONS = ("sts:AssumeRole", "sts:TagSession")

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


def cluster_name(stack: str, existing: str | None = None) -> str:
    """The EKS cluster's name: fixed, so that the bootstrap can fence the pods' roles to it;
    `existing` (the stack's `existingCluster`) when the stack deploys into a cluster it reads."""
    return existing or f"{PROJECT}-{stack}"


def metrics_log_group(stack: str) -> str:
    """The log group the metrics collector writes its EMF events to."""
    return f"/{PROJECT}/{stack}/metrics"


def partition_of(region: str) -> str:
    """The AWS partition of `region` (AWS General Reference, "Amazon Resource Names", partition:
    aws, aws-cn for China, aws-us-gov for GovCloud, read 2026-12-03)."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


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
    """One role of a stack: who assumes it and what it holds."""

    #: Suffix of its name (`role_name`) and key of the bootstrap's `stackRoleArns`.
    key: str
    description: str
    #: The service principal that assumes it (`eks.amazonaws.com`, `ec2.amazonaws.com`,
    #: `pods.eks.amazonaws.com`).
    principal: str
    #: AWS-managed policies, by path and name below `arn:<partition>:iam::aws:policy/`.
    managed_policies: tuple[str, ...] = ()
    #: Its one inline policy (JSON), if any.
    inline_policy: str | None = None
    #: The service account of a pod role (Pod Identity), None for the others.
    service_account: ServiceAccount | None = None
    #: The cluster a pod role's trust names: None for the stack's own (`cluster_name`).
    cluster: str | None = None

    def trust(self, account: str, partition: str, region: str, stack: str) -> dict[str, Any]:
        """The role's trust policy."""
        statement: dict[str, Any] = {
            "Effect": "Allow",
            "Principal": {"Service": self.principal},
            # EKS's service role as pulumi-eks's own (same file, `assumeRoleActions`); EC2's
            # instance profile role assumes with sts:AssumeRole alone.
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


def stack_roles(
    stack: str, region: str, app_namespace: str, existing_cluster: str | None = None
) -> tuple[StackRole, ...]:
    """The roles of `stack` in `region`, the pods' roles for whichever option uses them (the
    autoscaler on elastic stacks, the volume driver with `modelCache` volume) too: an unused
    role costs nothing, and a stack can turn an option on without another bootstrap.

    With `existing_cluster` (the stack's `existingCluster`) the pods' roles trust that cluster,
    and the stack has no cluster role (it creates no cluster) and no autoscaler role (it is
    never elastic there, and the cluster's own autoscaler may run as the same account).

    The collector's log group ARN names any account: a role writes only its own account's logs
    (CloudWatch Logs takes no resource policy for PutLogEvents)."""
    logs = f"arn:{partition_of(region)}:logs:{region}:*:log-group:{metrics_log_group(stack)}"
    name = cluster_name(stack, existing_cluster)
    roles = (
        StackRole(
            "cluster",
            f"EKS control plane of the {stack} stack",
            "eks.amazonaws.com",
            (CLUSTER_POLICY,),
        ),
        StackRole(
            "nodes", f"EKS managed nodes of the {stack} stack", "ec2.amazonaws.com", NODE_POLICIES
        ),
        StackRole(
            "ebs-csi",
            f"EBS CSI controller of the {stack} stack",
            POD_IDENTITY_PRINCIPAL,
            ("service-role/AmazonEBSCSIDriverPolicy",),
            service_account=ServiceAccount(CONTROLLER_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT),
        ),
        StackRole(
            "cloudwatch-agent",
            f"CloudWatch agent of the {stack} stack",
            POD_IDENTITY_PRINCIPAL,
            ("CloudWatchAgentServerPolicy",),
            service_account=ServiceAccount(AGENT_NAMESPACE, AGENT_SERVICE_ACCOUNT),
        ),
        StackRole(
            "autoscaler",
            f"Cluster Autoscaler of the {stack} stack",
            POD_IDENTITY_PRINCIPAL,
            inline_policy=autoscaler_policy(name),
            service_account=ServiceAccount(AUTOSCALER_NAMESPACE, AUTOSCALER_SERVICE_ACCOUNT),
        ),
        StackRole(
            "collector",
            f"Metrics collector of the {stack} stack",
            POD_IDENTITY_PRINCIPAL,
            inline_policy=emf_policy(logs),
            service_account=ServiceAccount(app_namespace, COLLECTOR_NAME),
        ),
    )
    if existing_cluster is None:
        return roles
    return tuple(
        replace(role, cluster=existing_cluster)
        for role in roles
        if role.key not in ("cluster", "autoscaler")
    )
