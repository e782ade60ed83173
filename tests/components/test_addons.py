"""The components whose pods call AWS, and the add-ons' log groups, under the recording mocks.

Policy checked here: every pod that calls AWS (the EBS CSI controller, the CloudWatch agent, the
Cluster Autoscaler, the metrics collector) gets its role through EKS Pod Identity: one
association for exactly its own namespace and service account, with the bootstrap's role of
that account (`ClusterRef.pod_roles`), and the add-on, chart or Deployment that runs the pod
comes after that association and the Pod Identity agent. No component creates IAM, and nothing
carries the IRSA annotation. The container logs that outlive a group recreation are kept for a
bounded time, never forever.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pytest

from components import watch
from components.addons import ASSOCIATION_ANNOTATION, ASSOCIATION_SETTLE, ClusterRef
from components.autoscaling import AUTOSCALER_CHART, Autoscaling, AutoscalingArgs
from components.manifests import identity, metrics
from components.manifests.identity import (
    AGENT_NAMESPACE,
    AGENT_SERVICE_ACCOUNT,
    AUTOSCALER_NAMESPACE,
    AUTOSCALER_SERVICE_ACCOUNT,
    CONTROLLER_NAMESPACE,
    CONTROLLER_SERVICE_ACCOUNT,
)
from components.monitoring import Monitoring, MonitoringArgs
from components.observability import ClusterLogs, ClusterLogsArgs, logs_query
from components.storage import ModelVolumes, ModelVolumesArgs
from infra.adapters import monitoring_layer, wiring
from infra.plan import addons
from infra.plan.stackfile import load_stack
from tests import builders
from tests.fakes.pulumi_mocks import ACCOUNT_ID, RecordingMocks, by_type, resolve, run

ADDON = "aws:eks/addon:Addon"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
SLEEP = "time:index/sleep:Sleep"
CHART = "kubernetes:helm.sh/v4:Chart"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"
CLUSTER_NAME = "gemma-eks"
STACK = "dev"
#: The bootstrap's pod roles of the dev stack, by service account, as IAM names them: a
#: distinct ARN for each, so a component that takes another account's role is seen.
POD_ROLES = {
    str(role.service_account): f"arn:aws:iam::{ACCOUNT_ID}:role/gemma-graviton/{STACK}/"
    f"{identity.role_name(STACK, role.key)}"
    for role in identity.stack_roles(wiring.NAMESPACE)
    if role.service_account is not None
}
COLLECTOR = f"{wiring.NAMESPACE}/{metrics.NAME}"
CSI = f"{CONTROLLER_NAMESPACE}/{CONTROLLER_SERVICE_ACCOUNT}"
AGENT = f"{AGENT_NAMESPACE}/{AGENT_SERVICE_ACCOUNT}"
AUTOSCALER = f"{AUTOSCALER_NAMESPACE}/{AUTOSCALER_SERVICE_ACCOUNT}"


def _cluster(agent: pulumi.Resource | None) -> ClusterRef:
    return ClusterRef(
        cluster_name=CLUSTER_NAME,
        kubernetes_version="1.34",
        pod_roles=POD_ROLES,
        identity_agent=agent,
        addon_versions=addons.pinned("1.34") or {},
    )


def _deploy() -> ClusterLogs:
    """Every component that runs a pod calling AWS, on one cluster whose Pod Identity agent is
    a stand-in add-on named `agent` (the cluster's own is `Cluster.identity_agent`)."""

    def program() -> ClusterLogs:
        agent = aws.eks.Addon(
            "agent", cluster_name=CLUSTER_NAME, addon_name="eks-pod-identity-agent"
        )
        cluster = _cluster(agent)
        logs = ClusterLogs("logs", ClusterLogsArgs(cluster, wiring.NAMESPACE))
        ModelVolumes("weights", ModelVolumesArgs(cluster, "gemma-graviton-gp3", 250))
        Monitoring(
            "watch",
            MonitoringArgs(
                cluster=cluster,
                collector=monitoring_layer.collector_spec(load_stack(STACK), STACK),
                application_log_group=f"/aws/containerinsights/{CLUSTER_NAME}/application",
                namespace=wiring.NAMESPACE,
                load_balancer_hostname="a1b2-c3d4.elb.us-west-2.amazonaws.com",
                watch_spec=watch.WatchSpec(
                    stack=STACK,
                    region="us-west-2",
                    namespace=f"GemmaGraviton/{STACK}",
                    waiting_threshold=3,
                    server_errors_threshold=5,
                ),
            ),
        )
        workload = k8s.core.v1.ConfigMap("workload", metadata={"name": "lws-stand-in"})
        Autoscaling(
            "scale",
            AutoscalingArgs(
                cluster=cluster,
                region="us-west-2",
                system_labels=wiring.SYSTEM_LABELS,
                server=builders.elastic_server_spec(),
                scaler=builders.scaler_spec(),
                autoscaler_image_tag="v1.34.3",
                workload=workload,
            ),
        )
        return logs

    return run(program)


def _consumers(mocks: RecordingMocks) -> dict[str, str]:
    """Service account -> URN of what runs its pod (the add-on, chart or Deployment)."""
    addon = {a.inputs["addonName"]: a.urn for a in by_type(mocks.records, ADDON)}
    chart = {c.inputs["chart"]: c.urn for c in by_type(mocks.records, CHART)}
    (collector,) = [
        d.urn
        for d in by_type(mocks.records, DEPLOYMENT)
        if d.inputs["spec"]["template"]["spec"].get("serviceAccountName") == metrics.NAME
    ]
    return {
        CSI: addon["aws-ebs-csi-driver"],
        AGENT: addon["amazon-cloudwatch-observability"],
        AUTOSCALER: chart[AUTOSCALER_CHART],
        COLLECTOR: collector,
    }


def test_what_calls_aws_comes_after_its_own_associations_wait_and_the_agent(
    mocks: RecordingMocks,
) -> None:
    """EKS's webhook gives a pod its credentials' address only when it admits the pod, once the
    association is effective (`ASSOCIATION_SETTLE` after it is created), and the agent serves
    them: a pod admitted before either runs without credentials until replaced."""
    _deploy()
    agent = next(a for a in by_type(mocks.records, ADDON) if a.name == "agent")
    ids = {
        a.outputs["associationId"]: f"{a.inputs['namespace']}/{a.inputs['serviceAccount']}"
        for a in by_type(mocks.records, ASSOCIATION)
    }
    # One association per account (a second would be refused by EKS: one role per account).
    assert len(set(ids.values())) == len(ids), ids
    waits = {ids[w.inputs["triggers"]["associationId"]]: w for w in by_type(mocks.records, SLEEP)}
    assert set(waits) == set(POD_ROLES)
    for wait in waits.values():
        assert wait.inputs["createDuration"] == ASSOCIATION_SETTLE, wait.urn
    for account, consumer in _consumers(mocks).items():
        depends = set(mocks.monitor.dependencies[consumer])
        assert agent.urn in depends, (account, consumer)
        # Its own association's wait, and no other account's.
        own = {w.urn for w in waits.values()} & depends
        assert own == {waits[account].urn}, (account, consumer)


def test_no_pod_role_is_named_by_irsa(mocks: RecordingMocks) -> None:
    """Pod Identity maps the service accounts in EKS's API: an IRSA annotation would send the
    SDK to a web identity that no OIDC provider of the account vouches for."""
    _deploy()
    accounts = by_type(mocks.records, SERVICE_ACCOUNT)
    assert [a.inputs["metadata"]["name"] for a in accounts] == [metrics.NAME]
    for record in mocks.records:
        assert IRSA_ANNOTATION not in json.dumps(record.inputs), record.urn
    for addon in by_type(mocks.records, ADDON):
        assert "serviceAccountRoleArn" not in addon.inputs, addon.urn
        # The associations are standalone: an add-on's own are refused for the versions and
        # accounts its published configuration does not declare (components/addons.py).
        assert "podIdentityAssociations" not in addon.inputs, addon.urn
    chart = next(c for c in by_type(mocks.records, CHART) if c.inputs["chart"] == AUTOSCALER_CHART)
    assert chart.inputs["values"]["rbac"]["serviceAccount"] == {
        "name": AUTOSCALER_SERVICE_ACCOUNT
    }, chart.urn
    # The pods carry only their association's id (the roll key), no role.
    assert list(chart.inputs["values"]["podAnnotations"]) == [ASSOCIATION_ANNOTATION], chart.urn


def test_a_pod_without_a_bootstrap_role_is_refused_and_none_waits_for_no_agent(
    mocks: RecordingMocks,
) -> None:
    without = {k: v for k, v in POD_ROLES.items() if k != CSI}
    cluster = replace(_cluster(None), pod_roles=without)
    with pytest.raises(ValueError) as refused:
        cluster.pod_role(CONTROLLER_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT)
    assert str(refused.value) == (f"no role for the service account {CSI}: add it to stack_roles")
    assert cluster.pod_role(AGENT_NAMESPACE, AGENT_SERVICE_ACCOUNT) == POD_ROLES[AGENT]
    with pytest.raises(ValueError, match=f"no role for the service account {CSI}"):
        run(lambda: ModelVolumes("weights", ModelVolumesArgs(cluster, "gp3", 250)))
    assert by_type(mocks.records, ADDON) == []
    # Without an agent nothing waits for one.
    assert _cluster(None).after_identity() == []


def test_container_logs_are_kept_for_a_bounded_time(mocks: RecordingMocks) -> None:
    logs = _deploy()
    groups = {
        g.inputs["name"]: g
        for g in by_type(mocks.records, LOG_GROUP)
        if g.inputs["name"].startswith("/aws/containerinsights/")
    }
    # Every group the agent and Fluent Bit write to (Container Insights' four), not only the
    # application one: a group the agent creates itself has no retention and outlives destroy.
    assert set(groups) == {
        f"/aws/containerinsights/{CLUSTER_NAME}/{kind}"
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
    application = groups[f"/aws/containerinsights/{CLUSTER_NAME}/application"]
    assert resolve(logs.log_group_name) == application.outputs["name"]
    assert resolve(logs.query) == logs_query(wiring.NAMESPACE)
    # The query reads the model namespace across recreations.
    query = logs_query("gemma-graviton")
    assert "filter kubernetes.namespace_name = 'gemma-graviton'" in query
    assert "sort @timestamp asc" in query
