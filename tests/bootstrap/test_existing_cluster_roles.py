"""A stack into a cluster it does not own (`existingCluster`): the bootstrap makes only the roles
such a stack uses, its pods' roles trust that cluster alone, and its deploy role's EKS writes
reach that cluster and what is in it, nothing else of the region."""

from __future__ import annotations

import json

import pytest

from components.manifests import identity
from infra.adapters.wiring import NAMESPACE
from infra.bootstrap import access
from infra.bootstrap.fences import EKS_OF_ANY_CLUSTER
from tests.bootstrap import iam_eval

CLUSTER = "platform-shared"
REGION = "us-west-2"
HERE = {"aws:RequestedRegion": REGION}
#: The EKS writes a deploy makes on a cluster and what is in it.
WRITES = (
    "eks:CreateNodegroup",
    "eks:DeleteNodegroup",
    "eks:CreateAddon",
    "eks:DeleteAddon",
    "eks:CreatePodIdentityAssociation",
    "eks:DeletePodIdentityAssociation",
)


def test_no_cluster_role_and_no_autoscaler_role_for_an_existing_cluster() -> None:
    roles = identity.stack_roles("dev", REGION, NAMESPACE, CLUSTER)
    assert [r.key for r in roles] == ["nodes", "ebs-csi", "cloudwatch-agent", "collector"]
    own = [r.key for r in identity.stack_roles("dev", REGION, NAMESPACE)]
    assert "cluster" in own and "autoscaler" in own


def test_the_pod_roles_trust_the_existing_cluster_alone() -> None:
    for role in identity.stack_roles("dev", REGION, NAMESPACE, CLUSTER):
        if role.service_account is None:
            continue
        (statement,) = role.trust("123456789012", "aws", REGION, "dev")["Statement"]
        arn = statement["Condition"]["StringEquals"]["aws:RequestTag/eks-cluster-arn"]
        assert arn == f"arn:aws:eks:{REGION}:123456789012:cluster/{CLUSTER}", role.key


def _policy() -> dict:
    return access.deploy_policy("dev", REGION, "acme-pulumi-state", CLUSTER)


@pytest.mark.parametrize("action", WRITES)
def test_the_deploy_roles_eks_writes_reach_the_named_cluster_only(action: str) -> None:
    policy = _policy()
    for kind, tail in (("cluster", ""), ("nodegroup", "/ng/uuid"), ("addon", "/x/uuid"),
                       ("podidentityassociation", "/a-1")):  # fmt: skip
        for name, allowed in (
            (CLUSTER, True),
            (identity.cluster_name("dev"), False),
            (f"{CLUSTER}-x", False),
        ):
            arn = f"arn:aws:eks:{REGION}:123456789012:{kind}/{name}{tail}"
            assert iam_eval.allowed(policy, action, arn, HERE) is allowed, (action, arn)


def test_the_deploy_role_of_an_existing_cluster_creates_no_cluster() -> None:
    text = json.dumps(_policy())
    for action in EKS_OF_ANY_CLUSTER:
        assert action not in text
        assert action in json.dumps(access.deploy_policy("dev", REGION, None))


def test_the_deploy_role_into_an_existing_cluster_is_no_creator_of_it() -> None:
    roles = access.ci_roles(
        "example-org/gemma-graviton",
        {"dev": REGION, "prod": "us-east-1"},
        None,
        clusters={"dev": CLUSTER, "prod": None},
    )
    by_key = {r.key: r for r in roles}
    assert by_key["deploy-dev"].creates_cluster_of == ()
    assert by_key["deploy-prod"].creates_cluster_of == ("prod",)
