"""The elastic stack under the recording mocks: KEDA's ScaledObject on the LeaderWorkerSet with the
queue and office-hours triggers, the Cluster Autoscaler and the system node group with their IAM,
the model node group from 0 to the planned most; and a fixed stack exactly as before."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from components import watch
from components.autoscaling import (
    AUTOSCALER_CHART_VERSION,
    AUTOSCALER_REPO,
    KEDA_CHART_VERSION,
    KEDA_REPO,
)
from infra.plan import elastic, readiness, sleep
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from tests.fakes.pulumi_mocks import RecordingMocks, by_type, named, one
from tests.program.harness import OWN_VALUES, run_program, shared_run

pytestmark = pytest.mark.usefixtures("as_pulumi_host")

NODE_GROUP = "eks:index:ManagedNodeGroup"
CHART = "kubernetes:helm.sh/v4:Chart"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
#: dev's resources (type, name) as the program created them before elasticity existed (commit
#: e8d8407), recorded under these mocks (its rendered objects: tests/fixtures/rendered/dev). A
#: change meant for every stack (issue 26's drain and PDB) records them again.
FIXED = Path(__file__).resolve().parents[1] / "fixtures" / "dev-resources-fixed.json"
SCHEDULE = {"timeZone": "Europe/Berlin", "start": "08:00", "end": "19:00", "groupsInside": 1}


def _run_elastic() -> tuple[RecordingMocks, Any, Any]:
    """The dev stack made elastic, run once for the tests that read it; its config and plan."""
    overrides = {"minGroups": 0, "maxGroups": 3, "schedule": SCHEDULE}
    mocks, _ = shared_run("dev", overrides)
    cfg = load_stack("dev", {**OWN_VALUES["dev"], **overrides})
    return mocks, cfg, plan(cfg, "dev")


def test_scaled_object_targets_the_lws_with_queue_and_cron() -> None:
    mocks, cfg, p = _run_elastic()
    lws = one(mocks.records, LWS)
    scaled = one(mocks.records, SCALED_OBJECT)
    spec = scaled.inputs["spec"]
    assert spec["scaleTargetRef"] == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "name": lws.inputs["metadata"]["name"],
    }, scaled.urn
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (0, 3)
    names = [(t["type"], t["name"]) for t in spec["triggers"]]
    assert names == [
        ("metrics-api", "queue"),
        ("metrics-api", "running"),  # the requests served hold their group
        ("cron", "office-hours"),
        ("metrics-api", "door-wake"),  # the door's wake flag
    ]
    assert spec["triggers"][2]["metadata"]["timezone"] == "Europe/Berlin"
    assert spec["triggers"][1]["metadata"]["targetValue"] == str(p.max_num_seqs)
    assert "replicas" not in lws.inputs["spec"], lws.urn
    params = elastic.scaling_parameters(cfg, p)
    assert spec["cooldownPeriod"] == params.down_window_s >= params.cold_start_s


def test_charts_are_pinned_and_the_autoscaler_has_its_own_role() -> None:
    mocks, _, _ = _run_elastic()
    keda = named(mocks.records, CHART, "scale-keda")
    assert keda.inputs["version"] == KEDA_CHART_VERSION
    assert keda.inputs["repositoryOpts"]["repo"] == KEDA_REPO
    assert keda.inputs["values"]["rbac"]["scaledRefKinds"] == [
        {"apiGroup": "leaderworkerset.x-k8s.io", "kind": "leaderworkersets"}
    ]
    assert keda.inputs["values"]["nodeSelector"] == {"gemma-graviton.dev/pool": "system"}
    autoscaler = named(mocks.records, CHART, "scale-cluster-autoscaler")
    assert autoscaler.inputs["version"] == AUTOSCALER_CHART_VERSION
    assert autoscaler.inputs["repositoryOpts"]["repo"] == AUTOSCALER_REPO
    # Its own role, the bootstrap's (read by name), through its own service account.
    role = named(mocks.records, "aws:iam/role:Role", "role-autoscaler")
    assert role.read and role.resource_id == "gemma-graviton-dev-autoscaler", role.urn
    identity = named(mocks.records, ASSOCIATION, "scale-autoscaler-identity")
    assert identity.inputs["roleArn"] == role.outputs["arn"], identity.urn
    assert (identity.inputs["namespace"], identity.inputs["serviceAccount"]) == (
        "kube-system",
        "cluster-autoscaler",
    )
    values = autoscaler.inputs["values"]
    assert values["rbac"]["serviceAccount"] == {"name": "cluster-autoscaler"}
    assert values["nodeSelector"] == {"gemma-graviton.dev/pool": "system"}
    # A node the autoscaler removes gives its model pods their whole grace, not its 600 s.
    lws = one(mocks.records, LWS)
    leader = lws.inputs["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    grace = int(leader["terminationGracePeriodSeconds"])  # numbers reach the mocks as floats
    assert grace > 600
    assert values["extraArgs"]["max-graceful-termination-sec"] == str(grace)


def test_the_autoscaler_chart_waits_for_its_credentials() -> None:
    # cluster-autoscaler 1.35.0 cloudprovider/aws/aws_cloud_provider.go `BuildAWS`: an error
    # creating the AWS manager (no credentials) is klog.Fatalf; EKS's webhook gives a pod its
    # credentials' address only when it admits the pod, so the association's wait comes first
    # (tests/program/test_pod_identity_waits.py holds every workload to it), and the agent.
    mocks, _, _ = _run_elastic()
    chart = named(mocks.records, CHART, "scale-cluster-autoscaler")
    wait = named(mocks.records, "time:index/sleep:Sleep", "scale-autoscaler-identity-settled")
    agent = named(mocks.records, "aws:eks/addon:Addon", "eks-pod-identity-agent")
    deps = mocks.monitor.dependencies[chart.urn]
    assert wait.urn in deps, (chart.urn, "should depend on", wait.urn)
    assert agent.urn in deps, (chart.urn, "should depend on", agent.urn)


@pytest.mark.parametrize("minor", sorted(elastic.AUTOSCALER_TAGS))
def test_the_autoscaler_image_follows_the_kubernetes_minor(
    minor: str, mocks: RecordingMocks
) -> None:
    # kubernetes/autoscaler cluster-autoscaler/README.md (the release of the cluster's minor) and
    # issue 9244: 1.35.0 never scales a 1.32 cluster (it waits for resource.k8s.io/v1).
    run_program(mocks, "dev", {"minGroups": 0, "maxGroups": 3, "kubernetesVersion": minor})
    chart = named(mocks.records, CHART, "scale-cluster-autoscaler")
    tag = chart.inputs["values"]["image"]["tag"]
    assert tag == elastic.AUTOSCALER_TAGS[minor], chart.urn
    assert tag.startswith(f"v{minor}."), chart.urn


def test_the_autoscaler_never_runs_more_nodes_than_the_plans_peak() -> None:
    """The node group's maximum is a fixed ceiling (no maxGroups edit may change its scaling
    block), so the autoscaler's own `--max-nodes-total` is the cost cap: the most groups' nodes
    at the peak of a change, and the system nodes (cluster-autoscaler FAQ.md, max-nodes-total)."""
    mocks, cfg, p = _run_elastic()
    chart = named(mocks.records, CHART, "scale-cluster-autoscaler")
    cap = int(chart.inputs["values"]["extraArgs"]["max-nodes-total"])
    assert cap == elastic.nodes_total_cap(cfg, p)
    peak = max(p.nodes + readiness.SURGE_NODES, 2 * p.nodes) + p.rollout.surge_nodes
    assert cap == peak + elastic.system_group(cfg).nodes
    assert cap < elastic.MODEL_NODES_CEILING


def test_model_nodes_scale_from_zero_and_system_nodes_stay() -> None:
    mocks, cfg, p = _run_elastic()
    model = named(mocks.records, NODE_GROUP, "eks-nodes")
    assert model.inputs["scalingConfig"] == {
        "minSize": 0,
        "desiredSize": 0,
        "maxSize": elastic.MODEL_NODES_CEILING,
    }, model.urn
    assert p.nodes == 3 * p.stages
    assert p.nodes + 2 + p.rollout.surge_nodes <= elastic.MODEL_NODES_CEILING
    assert model.inputs["ignoreScalingChanges"] is True
    assert model.inputs["taints"] == [
        {"key": "gemma-graviton.dev/pool", "value": "model", "effect": "NO_SCHEDULE"}
    ]
    system = named(mocks.records, NODE_GROUP, "eks-system-nodes")
    planned = elastic.system_group(cfg)
    assert system.inputs["instanceTypes"] == [planned.instance_type]
    size = planned.nodes
    assert system.inputs["scalingConfig"] == {"minSize": size, "desiredSize": size, "maxSize": size}
    assert system.inputs["labels"] == {"gemma-graviton.dev/pool": "system"}
    assert "taints" not in system.inputs
    # The same node role (policies; pods have roles of their own) and launch template (IMDS hop 1).
    assert system.inputs["nodeRoleArn"] == model.inputs["nodeRoleArn"]
    assert system.inputs["launchTemplate"]["id"] == model.inputs["launchTemplate"]["id"]


@pytest.mark.parametrize(
    "edit",
    [{"maxGroups": 2}, {"maxGroups": 5}, {"rolloutSurge": 2}, {"maxGroups": 4, "rolloutSurge": 0}],
)
def test_a_max_groups_or_surge_edit_leaves_the_model_node_group_s_scaling_alone(
    edit: dict[str, Any], mocks: RecordingMocks
) -> None:
    # Any change to the scaling block makes the AWS provider send all of it, the desired size
    # from Pulumi's state included (hashicorp/terraform-provider-aws
    # internal/service/eks/node_group.go `resourceNodeGroupUpdate`, commit 012e0a32 read
    # 2026-12-03); with `ignoreScalingChanges` and no refresh that is the size at creation, 0, and
    # EKS would terminate the serving nodes. So no such edit may change the block at all.
    overrides = {"minGroups": 0, "maxGroups": 3, "schedule": SCHEDULE}
    run_program(mocks, "dev", {**overrides, **edit})
    model = named(mocks.records, NODE_GROUP, "eks-nodes")
    assert model.inputs["scalingConfig"] == {
        "minSize": 0,
        "desiredSize": 0,
        "maxSize": elastic.MODEL_NODES_CEILING,
    }, model.urn


def test_a_fixed_stack_is_unchanged() -> None:
    mocks, _ = shared_run("dev")
    before = json.loads(FIXED.read_text())
    now = sorted([r.type_, r.name] for r in mocks.records)
    assert now == before["resources"]
    # Its rendered objects are pinned as text: tests/fixtures/rendered/dev (`make regen`; the
    # check is tests/test_regen.py).
    assert not by_type(mocks.records, SCALED_OBJECT)
    node_group = one(mocks.records, NODE_GROUP)
    assert "ignoreScalingChanges" not in node_group.inputs
    assert "taints" not in node_group.inputs
    # No KEDA on a fixed stack (kedacore/keda v2.20.2 is the elastic stacks' chart): no queue
    # floor to keep a trigger answering, and no group that KEDA could leave holding nodes (the
    # idle alarm).
    assert not {"scale-queue-floor", "watch-idle-nodes"} & {r.name for r in mocks.records}


def test_the_door_is_created_apart_from_the_group_and_rolls_with_the_key() -> None:
    mocks, _, _ = _run_elastic()
    deployment = named(
        mocks.records, "kubernetes:apps/v1:Deployment", "model-deployment-gemma-door"
    )
    template = deployment.inputs["spec"]["template"]
    assert template["spec"]["nodeSelector"] == {"gemma-graviton.dev/pool": "system"}
    annotations = template["metadata"]["annotations"]
    assert len(annotations["gemma-graviton.dev/api-key-fingerprint"]) == 16, deployment.urn
    services = {
        s.inputs["metadata"]["name"]: s.inputs["spec"]
        for s in by_type(mocks.records, "kubernetes:core/v1:Service")
    }
    assert services["gemma"]["selector"]["app.kubernetes.io/component"] == "door"
    assert services["gemma-leaders"]["type"] == "ClusterIP"
    lws = one(mocks.records, LWS)
    leader = lws.inputs["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    assert [c["name"] for c in leader["spec"]["containers"]] == ["vllm"], lws.urn
    assert "gemma-graviton.dev/api-key-fingerprint" in leader["metadata"]["annotations"]


def test_an_elastic_stack_alarms_when_the_model_does_not_wake() -> None:
    mocks, cfg, p = _run_elastic()
    asleep = named(
        mocks.records, "aws:cloudwatch/logMetricFilter:LogMetricFilter", "watch-answers-asleep"
    )
    assert asleep.inputs["pattern"] == watch.asleep_filter_pattern()
    assert asleep.inputs["metricTransformation"]["name"] == watch.ASLEEP_ANSWERS
    alarms = {r.name: r for r in by_type(mocks.records, "aws:cloudwatch/metricAlarm:MetricAlarm")}
    assert "watch-group-restart" not in alarms
    queries = {q["id"]: q for q in alarms["watch-not-waking"].inputs["metricQueries"]}
    # Its clock is this stack's own planned wake-up, at its slow end.
    wake = sleep.door_asleep(cfg, p).wake_seconds
    assert queries["asleep"]["metric"]["period"] == watch.not_waking_period_s(wake) >= 1.5 * wake
    assert queries["asleep"]["metric"]["metricName"] == watch.ASLEEP_ANSWERS


def test_the_queue_floor_is_on_the_system_nodes_before_the_scaled_object() -> None:
    # kedacore/keda v2.20.2 pkg/scalers/metrics_api_scaler.go: with no ready endpoint behind the
    # metrics Service the queue trigger errors, and pkg/scaling/executor/scale_scaledobjects.go
    # never scales a ScaledObject in error to zero; the floor is that Service's endpoint.
    mocks, _, _ = _run_elastic()
    floor = named(mocks.records, "kubernetes:apps/v1:Deployment", "scale-queue-floor")
    template = floor.inputs["spec"]["template"]
    assert template["spec"]["nodeSelector"] == {"gemma-graviton.dev/pool": "system"}, floor.urn
    assert "tolerations" not in template["spec"] or template["spec"]["tolerations"] == []
    service = named(mocks.records, "kubernetes:core/v1:Service", "scale-leader-metrics")
    selector = service.inputs["spec"]["selector"]
    assert all(template["metadata"]["labels"].get(k) == v for k, v in selector.items())
    lws = one(mocks.records, LWS)
    leader = lws.inputs["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["labels"]
    assert all(leader.get(k) == v for k, v in selector.items()), lws.urn
    config = named(mocks.records, "kubernetes:core/v1:ConfigMap", "scale-queue-floor")
    assert "vllm:num_requests_waiting 0" in config.inputs["data"]["nginx.conf"]
    named(mocks.records, "kubernetes:networking.k8s.io/v1:NetworkPolicy", "scale-queue-floor")
    # Two pods and a budget keeping one through a drain (kubernetes v1.35
    # pkg/registry/core/pod/storage/eviction.go; components.manifests.scaling).
    assert floor.inputs["spec"]["replicas"] == 2, floor.urn
    budget = named(mocks.records, "kubernetes:policy/v1:PodDisruptionBudget", "scale-queue-floor")
    assert budget.inputs["spec"]["minAvailable"] == 1, budget.urn
    assert budget.inputs["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow", budget.urn
    chosen = budget.inputs["spec"]["selector"]["matchLabels"]
    assert chosen == floor.inputs["spec"]["selector"]["matchLabels"], budget.urn
    assert all(template["metadata"]["labels"].get(k) == v for k, v in chosen.items())
    scaled = one(mocks.records, SCALED_OBJECT)
    assert floor.urn in mocks.monitor.dependencies[scaled.urn], scaled.urn


def test_an_elastic_stack_alarms_on_model_nodes_with_no_ready_leader() -> None:
    # The bound the alarm waits out: KEDA v2.20.2 scale_scaledobjects.go `scaleToZeroOrIdle`
    # (cooldownPeriod, then the next poll) and the autoscaler's --scale-down-unneeded-time.
    mocks, cfg, p = _run_elastic()
    e = elastic.elastic_plan(cfg, p, dt.date(2026, 12, 3))
    assert e is not None
    alarm = named(mocks.records, "aws:cloudwatch/metricAlarm:MetricAlarm", "watch-idle-nodes")
    assert alarm.inputs["evaluationPeriods"] == e.idle_alarm_s // 60, alarm.urn
    scaled = one(mocks.records, SCALED_OBJECT).inputs["spec"]
    to_zero = scaled["cooldownPeriod"] + scaled["pollingInterval"]
    assert e.idle_alarm_s >= to_zero + elastic.SCALE_DOWN_UNNEEDED_SECONDS
    queries = {q["id"]: q for q in alarm.inputs["metricQueries"]}
    assert queries["nodes"]["metric"]["dimensions"] == {"ClusterName": "gemma-graviton-dev"}
    assert queries["idle"]["expression"].startswith(f"IF(nodes > {e.system.nodes},")
