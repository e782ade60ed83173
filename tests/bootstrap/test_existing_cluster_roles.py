"""A stack into a cluster it does not own (`existingCluster`): the bootstrap makes only the roles
such a stack uses, its pods' roles trust that cluster alone, and its deploy role creates no
cluster (that its EKS writes reach that cluster alone: tests/bootstrap/test_access.py)."""

from __future__ import annotations

import json

from components.manifests import identity
from infra.adapters.wiring import NAMESPACE
from infra.bootstrap import access
from infra.bootstrap.fences import EKS_OF_ANY_CLUSTER

CLUSTER = "platform-shared"
REGION = "us-west-2"


def test_no_cluster_role_and_no_autoscaler_role_for_an_existing_cluster() -> None:
    roles = identity.stack_roles(NAMESPACE, CLUSTER)
    assert [r.key for r in roles] == ["nodes", "ebs-csi", "cloudwatch-agent", "collector"]
    own = [r.key for r in identity.stack_roles(NAMESPACE)]
    assert "cluster" in own and "autoscaler" in own


def test_the_pod_roles_trust_the_existing_cluster_alone() -> None:
    for role in identity.stack_roles(NAMESPACE, CLUSTER):
        if role.service_account is None:
            continue
        (statement,) = role.trust("123456789012", "aws", REGION, "dev")["Statement"]
        arn = statement["Condition"]["StringEquals"]["aws:RequestTag/eks-cluster-arn"]
        assert arn == f"arn:aws:eks:{REGION}:123456789012:cluster/{CLUSTER}", role.key


def test_the_deploy_role_into_an_existing_cluster_creates_none_and_is_no_creator_of_it() -> None:
    text = json.dumps(access.deploy_policy("dev", REGION, "acme-pulumi-state", CLUSTER))
    for action in EKS_OF_ANY_CLUSTER:
        assert action not in text
        assert action in json.dumps(access.deploy_policy("dev", REGION, None))
    roles = access.ci_roles(
        "example-org/gemma-graviton",
        {"dev": REGION, "prod": "us-east-1"},
        None,
        clusters={"dev": CLUSTER, "prod": None},
    )
    by_key = {r.key: r for r in roles}
    assert by_key["deploy-dev"].creates_cluster_of == ()
    assert by_key["deploy-prod"].creates_cluster_of == ("prod",)
    # Nor can the stack list dev's preview role (`clusterViewerArns` is refused with
    # `existingCluster`): the owner lets it in (its line: test_program.py).
    preview, prod_preview = by_key["preview"], by_key["preview-prod"]
    assert (preview.cluster_viewer_of, preview.owner_viewer_of) == ((), ("dev",))
    assert (prod_preview.cluster_viewer_of, prod_preview.owner_viewer_of) == (("prod",), ())
