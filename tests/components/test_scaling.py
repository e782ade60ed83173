"""The elastic stack's objects: the ScaledObject against KEDA 2.20.2's CRD schema, the leaders'
metrics Service and the autoscaled LeaderWorkerSet against the real schemas, and the policy that
lets KEDA read the queue."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from components import manifests
from components.autoscaling import autoscaler_policy, autoscaler_values
from components.manifests import scaling
from infra.plan import addons, liveness, wiring
from infra.plan.config import ConfigError
from infra.plan.render import rendered_objects
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from tests.fakes import k8s_schemas

TODAY = dt.date(2026, 12, 2)


def _prod() -> tuple[Any, Any, manifests.ServerSpec, scaling.ScalerSpec]:
    cfg = load_stack("prod", today=TODAY)
    p = plan(cfg, "prod")
    return cfg, p, wiring.server_spec(cfg, p), wiring.scaler_spec(cfg, p)


def test_scaled_object_targets_the_leader_worker_set_with_queue_and_cron() -> None:
    _, p, spec, scaler = _prod()
    obj = scaling.scaled_object(spec, scaler)
    assert k8s_schemas.scaled_object_errors(obj) == []
    assert obj["spec"]["scaleTargetRef"] == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "name": spec.lws_name,
    }
    assert (obj["spec"]["minReplicaCount"], obj["spec"]["maxReplicaCount"]) == (0, 3)
    queue, cron = obj["spec"]["triggers"]
    assert queue["type"] == "metrics-api"
    meta = queue["metadata"]
    assert meta["valueLocation"] == "vllm:num_requests_waiting"
    assert (meta["format"], meta["aggregationType"]) == ("prometheus", "sum")
    assert meta["aggregateFromKubeServiceEndpoints"] == "true"
    assert meta["url"] == (
        f"http://{scaling.metrics_service_name(spec)}.{spec.namespace}.svc.cluster.local:"
        f"{spec.port}/metrics"  # behind the door, vLLM's own port (no gatekeeper in the group)
    )
    assert meta["targetValue"] == str(int(p.max_concurrency))
    assert cron == {
        "type": "cron",
        "name": "office-hours",
        "metadata": {
            "timezone": "America/New_York",
            "start": "0 8 * * 1,2,3,4,5",
            "end": "0 19 * * 1,2,3,4,5",
            "desiredReplicas": "1",
        },
    }
    behavior = obj["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == scaler.down_window_s
    assert obj["spec"]["cooldownPeriod"] == scaler.down_window_s


def test_queue_trigger_waits_longer_than_a_busy_leaders_metrics() -> None:
    # kedacore/keda v2.20.2 pkg/scalers/metrics_api_scaler.go: the trigger metadata's `timeout`
    # (a Go duration or milliseconds, pkg/scalers/scalersconfig/typed_config.go) replaces the
    # operator's KEDA_HTTP_DEFAULT_TIMEOUT, 3000 ms by default (cmd/operator/main.go); without
    # it the trigger gives up before the 5 s a busy leader's /metrics is allowed.
    _, _, spec, scaler = _prod()
    timeout = scaling.queue_trigger(spec, scaler)["metadata"]["timeout"]
    assert timeout == "10s"
    seconds = int(timeout.removesuffix("s"))
    assert liveness.PROBE_REQUEST_S < seconds < scaler.polling_s
    assert seconds > 3  # the operator's default, which today's render falls back to


def test_extra_triggers_follow_the_queue_and_the_schedule() -> None:
    _, _, spec, scaler = _prod()
    wake = {"type": "metrics-api", "name": "wake", "metadata": {"url": "http://door/wake"}}
    obj = scaling.scaled_object(spec, scaler, [wake])
    assert [t["name"] for t in obj["spec"]["triggers"]] == ["queue", "office-hours", "wake"]
    no_schedule = scaling.ScalerSpec(**{**scaler.__dict__, "schedule": None})
    assert [t["name"] for t in scaling.scaled_object(spec, no_schedule)["spec"]["triggers"]] == [
        "queue"
    ]


def test_schema_check_catches_a_wrong_scaled_object() -> None:
    _, _, spec, scaler = _prod()
    obj = scaling.scaled_object(spec, scaler)
    obj["spec"]["minReplicas"] = 0
    assert any("minReplicas" in e for e in k8s_schemas.scaled_object_errors(obj))
    obj = scaling.scaled_object(spec, scaler)
    del obj["spec"]["scaleTargetRef"]["name"]
    assert k8s_schemas.scaled_object_errors(obj) != []


def test_committed_keda_copy_is_the_crd_structure() -> None:
    schema = k8s_schemas.scaled_object_schema()
    spec = schema["properties"]["spec"]
    assert spec["required"] == ["scaleTargetRef", "triggers"]
    assert "description" not in str(schema)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_rendered_objects_pass_the_real_schemas(stack: str) -> None:
    cfg = load_stack(stack, today=TODAY)
    objects = rendered_objects(cfg, plan(cfg, stack))
    kinds = [o["kind"] for o in objects]
    assert ("ScaledObject" in kinds) is cfg.elastic
    for obj in objects:
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        assert k8s_schemas.object_errors(obj, cfg.kubernetes_version) == [], name


def test_an_autoscaled_group_leaves_its_count_to_keda_and_tolerates_the_model_taint() -> None:
    _, _, spec, _ = _prod()
    lws = manifests.leader_worker_set(spec)
    assert "replicas" not in lws["spec"]
    for role in ("leaderTemplate", "workerTemplate"):
        pod = lws["spec"]["leaderWorkerTemplate"][role]["spec"]
        assert pod["tolerations"] == [
            {"operator": "Equal", "key": "gemma-graviton.dev/pool", "value": "model",
             "effect": "NoSchedule"}
        ]  # fmt: skip
    fixed = load_stack("dev", today=TODAY)
    fixed_lws = manifests.leader_worker_set(wiring.server_spec(fixed, plan(fixed, "dev")))
    assert fixed_lws["spec"]["replicas"] == 1
    assert "tolerations" not in fixed_lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]


def test_metrics_service_selects_leaders_only_and_keda_may_read_them() -> None:
    _, _, spec, _ = _prod()
    service = scaling.metrics_service(spec)
    assert service["spec"]["selector"] == {
        manifests.LWS_NAME_LABEL: spec.lws_name,
        manifests.LWS_WORKER_INDEX_LABEL: "0",
    }
    policy = manifests.network_policy(spec)
    metrics_rule = next(
        r
        for r in policy["spec"]["ingress"]
        if r.get("ports", [{}])[0].get("port") == scaling.metrics_port(spec)
    )
    assert scaling.keda_peer() in metrics_rule["from"]
    fixed = load_stack("dev", today=TODAY)
    fixed_policy = manifests.network_policy(wiring.server_spec(fixed, plan(fixed, "dev")))
    assert all(
        scaling.keda_peer() not in rule.get("from", []) for rule in fixed_policy["spec"]["ingress"]
    )


def test_autoscaler_may_change_only_this_clusters_groups() -> None:
    doc = json.loads(autoscaler_policy("gemma-graviton-prod"))
    reads, writes = doc["Statement"]
    assert "eks:DescribeNodegroup" in reads["Action"]  # labels and taints at 0 nodes
    assert writes["Action"] == [
        "autoscaling:SetDesiredCapacity",
        "autoscaling:TerminateInstanceInAutoScalingGroup",
    ]
    assert writes["Condition"] == {
        "StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/gemma-graviton-prod": "owned"}
    }
    values = autoscaler_values(
        "c", "us-east-1", "arn:aws:iam::1:role/r", wiring.SYSTEM_LABELS, 2985, "v1.35.2"
    )
    assert values["rbac"]["serviceAccount"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/r"
    }
    assert values["nodeSelector"] == wiring.SYSTEM_LABELS
    assert values["image"]["tag"] == "v1.35.2"


def test_an_autoscaler_release_is_pinned_for_each_supported_minor() -> None:
    # kubernetes/autoscaler cluster-autoscaler/README.md: the latest release of the cluster's
    # minor; 1.35 waits for resource.k8s.io/v1, served from 1.34 only (kubernetes/autoscaler
    # issue 9244). Every version the add-on table accepts has its own release.
    assert set(addons.AUTOSCALER_TAGS) == set(addons.ADDON_VERSIONS)
    for minor, tag in addons.AUTOSCALER_TAGS.items():
        assert tag.startswith(f"v{minor}."), (minor, tag)
        assert addons.autoscaler_tag(minor) == tag
    assert addons.autoscaler_tag("1.32") == "v1.32.7"  # not 1.35's, which never scales 1.32


def test_a_minor_without_an_autoscaler_release_is_refused() -> None:
    with pytest.raises(ConfigError) as refused:
        addons.autoscaler_tag("1.31")
    assert str(refused.value) == (
        "`kubernetesVersion` 1.31 has no pinned Cluster Autoscaler release "
        "(infra/plan/addons.py AUTOSCALER_TAGS); use 1.35, or add the latest "
        "cluster-autoscaler v1.31.x tag"
    )
