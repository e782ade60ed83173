"""The add-ons that call AWS and the log group, under the recording mocks.

Policy checked here: each add-on's role can be assumed only by its own controller's service
account (one exact `sub`, the STS audience, nothing wildcarded), and the container logs that
outlive a group recreation are kept for a bounded time, never forever.
"""

from __future__ import annotations

import json

from components.addons import ClusterRef
from components.observability import (
    AGENT_NAMESPACE,
    AGENT_SERVICE_ACCOUNT,
    ClusterLogs,
    ClusterLogsArgs,
    logs_query,
)
from components.storage import ModelVolumes, ModelVolumesArgs
from infra.plan import addons
from tests.fakes.pulumi_mocks import RecordingMocks, by_type, resolve, run

ROLE = "aws:iam/role:Role"
ADDON = "aws:eks/addon:Addon"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
OIDC_ARN = "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/ABC"
OIDC_URL = "https://oidc.eks.us-west-2.amazonaws.com/id/ABC"
ISSUER = OIDC_URL.removeprefix("https://")
CLUSTER = ClusterRef(
    cluster_name="gemma-eks",
    kubernetes_version="1.34",
    oidc_provider_arn=OIDC_ARN,
    oidc_provider_url=OIDC_URL,
    addon_versions=addons.pinned("1.34") or {},
)


def _deploy() -> ClusterLogs:
    def program() -> ClusterLogs:
        logs = ClusterLogs("logs", ClusterLogsArgs(CLUSTER, "gemma-graviton"))
        ModelVolumes("weights", ModelVolumesArgs(CLUSTER, "gemma-graviton-gp3", 250))
        return logs

    return run(program)


def _trust_by_addon(mocks: RecordingMocks) -> dict[str, dict[str, object]]:
    """Each add-on's name -> the trust policy of the role it runs as."""
    roles = {r.outputs["arn"]: r for r in by_type(mocks.records, ROLE)}
    return {
        addon.inputs["addonName"]: json.loads(
            roles[addon.inputs["serviceAccountRoleArn"]].inputs["assumeRolePolicy"]
        )
        for addon in by_type(mocks.records, ADDON)
    }


def test_each_addon_role_trusts_exactly_its_own_service_account(mocks: RecordingMocks) -> None:
    _deploy()
    expected = {
        "amazon-cloudwatch-observability": f"system:serviceaccount:{AGENT_NAMESPACE}:"
        f"{AGENT_SERVICE_ACCOUNT}",
        "aws-ebs-csi-driver": "system:serviceaccount:kube-system:ebs-csi-controller-sa",
    }
    trusts = _trust_by_addon(mocks)
    assert set(trusts) == set(expected)
    for addon, trust in trusts.items():
        (statement,) = trust["Statement"]  # type: ignore[misc]
        assert statement["Effect"] == "Allow", addon
        assert statement["Principal"] == {"Federated": OIDC_ARN}, addon
        assert statement["Action"] == "sts:AssumeRoleWithWebIdentity", addon
        # Exact matching only: a StringLike or a `*` would admit every account of the namespace.
        assert statement["Condition"] == {
            "StringEquals": {
                f"{ISSUER}:sub": expected[addon],
                f"{ISSUER}:aud": "sts.amazonaws.com",
            }
        }, addon
        assert "*" not in json.dumps(statement["Condition"]), addon


def test_container_logs_are_kept_for_a_bounded_time(mocks: RecordingMocks) -> None:
    logs = _deploy()
    groups = {g.inputs["name"]: g for g in by_type(mocks.records, LOG_GROUP)}
    # Every group the agent and Fluent Bit write to (Container Insights' four), not only the
    # application one: a group the agent creates itself has no retention and outlives destroy.
    assert set(groups) == {
        f"/aws/containerinsights/gemma-eks/{kind}"
        for kind in ("application", "dataplane", "host", "performance")
    }
    (agent,) = [
        a
        for a in by_type(mocks.records, ADDON)
        if a.inputs["addonName"] == "amazon-cloudwatch-observability"
    ]
    for group in groups.values():
        # 0 or no value means CloudWatch keeps the logs forever (and bills them forever).
        retention = group.inputs.get("retentionInDays")
        assert retention is not None and 0 < retention <= 90, group.urn
        # The group exists with its retention before the agent can create it without one.
        assert group.urn in mocks.monitor.dependencies[agent.urn], agent.urn
    application = groups["/aws/containerinsights/gemma-eks/application"]
    assert resolve(logs.log_group_name) == application.outputs["name"]
    assert resolve(logs.query) == logs_query("gemma-graviton")


def test_logs_query_reads_the_model_namespace_across_recreations() -> None:
    query = logs_query("gemma-graviton")
    assert "filter kubernetes.namespace_name = 'gemma-graviton'" in query
    assert "sort @timestamp asc" in query
