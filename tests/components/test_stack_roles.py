"""The stacks' IAM roles: who assumes each (`components.manifests.identity`, pure), what each
holds (`components.manifests.role_policies`, pure) and how the program reads them; how the
bootstrap makes them (`components.ci_stack_roles.StackRoles`), for every stack file:
tests/bootstrap/test_program.py.

Policy checked here: a pod role admits EKS Pod Identity only, for its own stack's cluster and
its own service account, matched exactly on the session tags EKS Pod Identity sets; the cluster
role trusts EKS and the node role EC2, each with only its own managed policies; every role's
name fits IAM's limit on both committed stacks.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pulumi
import pytest

from components.manifests import identity, role_policies
from components.manifests.identity import StackRole
from components.stack_roles import existing_roles, pod_role_arns
from infra.adapters import monitoring_layer, wiring
from infra.plan import config_parts
from infra.plan.stackfile import load_stack
from tests.components.test_addons import AGENT, AUTOSCALER, COLLECTOR, CSI
from tests.fakes.pulumi_mocks import ACCOUNT_ID, RecordingMocks, by_type, named, resolve, run
from tests.program.harness import bootstrap_roles

TODAY = dt.date(2026, 12, 3)
STACKS = ("dev", "prod")
ROLE = "aws:iam/role:Role"
#: IAM's limit on a role name (IAM User Guide, "IAM object quotas", read 2026-12-03).
ROLE_NAME_LIMIT = 64
#: The session tags EKS Pod Identity sets on every session it opens for a pod (EKS User Guide,
#: pod-id-abac.html, read 2026-12-03), as trust-policy condition keys.
CLUSTER_TAG = "aws:RequestTag/eks-cluster-arn"
NAMESPACE_TAG = "aws:RequestTag/kubernetes-namespace"
ACCOUNT_TAG = "aws:RequestTag/kubernetes-service-account"


def _region(stack: str) -> str:
    return load_stack(stack, today=TODAY).region


def _roles(stack: str) -> dict[str, StackRole]:
    return {r.key: r for r in identity.stack_roles(wiring.NAMESPACE)}


def _held(stack: str) -> dict[str, role_policies.RolePolicies]:
    return role_policies.policies(stack, _region(stack))


def _statement(role: StackRole, stack: str) -> dict[str, Any]:
    trust = role.trust(ACCOUNT_ID, "aws", _region(stack), stack)
    assert trust["Version"] == "2012-10-17", role.key
    (statement,) = trust["Statement"]
    assert statement["Effect"] == "Allow", role.key
    return statement


# -- the pods' roles -----------------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_every_pod_role_admits_pod_identity_for_its_own_account_in_its_own_cluster(
    stack: str,
) -> None:
    """An association of the role with another service account, or in another stack's cluster,
    gets no credentials: EKS Pod Identity's tags must name this cluster and this account. The
    program names its EKS cluster `identity.cluster_name` (infra/__main__.py), and the
    `eks-cluster-arn` tag is that cluster's ARN in the stack's own account and partition."""
    region, cluster = _region(stack), identity.cluster_name(stack)
    assert cluster == f"gemma-graviton-{stack}"
    pods = [r for r in _roles(stack).values() if r.service_account is not None]
    assert {str(r.service_account) for r in pods} == {CSI, AGENT, AUTOSCALER, COLLECTOR}
    for role in pods:
        assert role.service_account is not None
        statement = _statement(role, stack)
        assert role.principal == identity.POD_IDENTITY_PRINCIPAL == "pods.eks.amazonaws.com"
        assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}, role.key
        # EKS Pod Identity tags the session it assumes: without TagSession it is refused.
        assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"], role.key
        # Exact matching only: a StringLike or a `*` would admit another cluster or account.
        assert statement["Condition"] == {
            "StringEquals": {
                CLUSTER_TAG: f"arn:aws:eks:{region}:{ACCOUNT_ID}:cluster/{cluster}",
                NAMESPACE_TAG: role.service_account.namespace,
                ACCOUNT_TAG: role.service_account.name,
            }
        }, role.key
        assert "*" not in json.dumps(statement["Condition"]), role.key
        gov = role.trust("210987654321", "aws-us-gov", "us-gov-west-1", stack)["Statement"][0]
        assert gov["Condition"]["StringEquals"][CLUSTER_TAG] == (
            f"arn:aws-us-gov:eks:us-gov-west-1:210987654321:cluster/{cluster}"
        ), role.key


@pytest.mark.parametrize("stack", STACKS)
def test_each_pod_role_holds_only_its_own_permissions(stack: str) -> None:
    roles = _held(stack)
    assert roles["ebs-csi"].managed_policies == ("service-role/AmazonEBSCSIDriverPolicy",)
    assert roles["ebs-csi"].inline_policy is None
    assert roles["cloudwatch-agent"].managed_policies == ("CloudWatchAgentServerPolicy",)
    assert roles["cloudwatch-agent"].inline_policy is None
    assert roles["autoscaler"].managed_policies == ()
    assert roles["autoscaler"].inline_policy == role_policies.autoscaler_policy(
        identity.cluster_name(stack)
    )
    assert roles["collector"].managed_policies == ()
    (statement,) = json.loads(roles["collector"].inline_policy or "{}")["Statement"]
    # The group the collector writes to (its spec's, `monitoring_layer.collector_spec`).
    group = monitoring_layer.collector_spec(load_stack(stack, today=TODAY), stack).log_group
    assert group == identity.metrics_log_group(stack)
    assert statement["Resource"] == [
        f"arn:aws:logs:{_region(stack)}:*:log-group:{group}",
        f"arn:aws:logs:{_region(stack)}:*:log-group:{group}:*",
    ]


def test_the_collector_writes_log_events_to_its_own_group_only() -> None:
    group = "arn:aws:logs:us-west-2:123456789012:log-group:/gemma-graviton/dev/metrics"
    document = json.loads(role_policies.emf_policy(group))
    (statement,) = document["Statement"]
    assert statement["Effect"] == "Allow"
    # CloudWatch makes the metrics from the EMF events: no PutMetricData, nothing else.
    assert statement["Action"] == [
        "logs:CreateLogStream",
        "logs:DescribeLogStreams",
        "logs:PutLogEvents",
    ]
    assert statement["Resource"] == [group, f"{group}:*"]
    # The group's ARN as CloudWatch returns it (with `:*`) gives the same policy.
    assert role_policies.emf_policy(f"{group}:*") == role_policies.emf_policy(group)


# -- the cluster's and the nodes' roles ----------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_the_cluster_role_trusts_eks_and_the_node_role_ec2(stack: str) -> None:
    roles, held = _roles(stack), _held(stack)
    cluster, nodes = _statement(roles["cluster"], stack), _statement(roles["nodes"], stack)

    assert cluster["Principal"] == {"Service": "eks.amazonaws.com"}
    assert "sts:AssumeRole" in cluster["Action"]
    assert "Condition" not in cluster
    assert held["cluster"].managed_policies == (role_policies.CLUSTER_POLICY,)
    assert role_policies.CLUSTER_POLICY == "AmazonEKSClusterPolicy"
    assert roles["cluster"].service_account is None and held["cluster"].inline_policy is None

    # An instance profile's role is assumed with sts:AssumeRole alone.
    assert nodes["Principal"] == {"Service": "ec2.amazonaws.com"}
    assert nodes["Action"] == ["sts:AssumeRole"]
    assert "Condition" not in nodes
    # The pods that call AWS have roles of their own: the nodes hold only what a node needs,
    # the worker policy holding the Pod Identity agent's eks-auth:AssumeRoleForPodIdentity.
    assert (
        set(held["nodes"].managed_policies)
        == set(role_policies.NODE_POLICIES)
        == {
            "AmazonEKSWorkerNodePolicy",
            "AmazonEKS_CNI_Policy",
            "AmazonEC2ContainerRegistryReadOnly",
        }
    )
    assert roles["nodes"].service_account is None and held["nodes"].inline_policy is None


# -- names ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_role_names_fit_iams_limit_and_are_distinct(stack: str) -> None:
    roles = identity.stack_roles(wiring.NAMESPACE)
    # What each holds is known for every role, and for no other.
    assert [r.key for r in roles] == list(_held(stack))
    names = [identity.role_name(stack, r.key) for r in roles]
    for name in names:
        assert len(name) <= ROLE_NAME_LIMIT, (name, len(name))
        assert name.startswith(f"{identity.PROJECT}-{stack}-"), name
    assert len(set(names)) == len(names)
    accounts = [str(r.service_account) for r in roles if r.service_account is not None]
    # One role per service account: EKS allows one association per account.
    assert len(set(accounts)) == len(accounts)


def test_the_project_is_the_configs() -> None:
    assert identity.PROJECT == config_parts.PROJECT


# -- the program's read of the bootstrap's roles ---------------------------------------------------


def test_the_program_reads_the_roles_and_maps_each_account_to_its_own(
    mocks: RecordingMocks,
) -> None:
    stack = "dev"
    specs = identity.stack_roles(wiring.NAMESPACE)
    mocks.existing |= bootstrap_roles(stack)

    def program() -> dict[str, pulumi.Output[str]]:
        found = existing_roles("role", stack, [s.key for s in specs], pulumi.ResourceOptions())
        return pod_role_arns(specs, found)

    arns = run(program)
    # Read, never registered: nothing of IAM is created by the program.
    for record in by_type(mocks.records, ROLE):
        assert record.inputs == {}, record.urn
        assert record.urn not in mocks.monitor.dependencies, record.urn
    pods = [s for s in specs if s.service_account is not None]
    assert set(arns) == {str(s.service_account) for s in pods}
    for spec in pods:
        read = named(mocks.records, ROLE, f"role-{spec.key}")
        assert resolve(arns[str(spec.service_account)]) == read.outputs["arn"], read.urn
        assert read.resource_id == identity.role_name(stack, spec.key), read.urn
