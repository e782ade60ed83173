"""The elastic stack's objects: the ScaledObject against KEDA 2.20.2's CRD schema, the leaders'
metrics Service and the autoscaled LeaderWorkerSet against the real schemas, and the policy that
lets KEDA read the queue."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from components import manifests
from components.autoscaling import autoscaler_values
from components.manifests import gatekeeper, scaling
from components.manifests.role_policies import autoscaler_policy
from infra.adapters import wiring
from infra.adapters.render import rendered_objects
from infra.plan import addons, elastic, liveness
from infra.plan.config import ConfigError
from tests import builders, door_harness
from tests.components.test_pod_security import restricted_findings
from tests.components.test_programs import answering
from tests.components.test_semantics import _one
from tests.fakes import k8s_schemas
from tools.rehearse.group.ranks import free_port

TODAY = dt.date(2026, 12, 2)


def _prod() -> tuple[Any, Any, manifests.ServerSpec, scaling.ScalerSpec]:
    cfg, p = builders.planned("prod", today=TODAY)
    return cfg, p, builders.planned_spec("prod", today=TODAY), elastic.scaling_parameters(cfg, p)


#: The hold trigger's own metadata over the queue trigger's (builders' scaler: 256, as planned).
HOLD = {"valueLocation": scaling.RUNNING_METRIC, "targetValue": "256"}


def _scaled() -> tuple[manifests.ServerSpec, scaling.ScalerSpec]:
    """An elastic server and its scaler with an office-hours window."""
    window = builders.cron_window(time_zone="America/New_York", groups_inside=1)
    return builders.elastic_server_spec(), builders.scaler_spec(schedule=window)


def test_scaled_object_targets_the_leader_worker_set_with_its_triggers() -> None:
    spec, scaler = _scaled()
    obj = scaling.scaled_object(spec, scaler)
    assert k8s_schemas.scaled_object_errors(obj) == []
    assert obj["spec"]["scaleTargetRef"] == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "name": spec.lws_name,
    }
    assert (obj["spec"]["minReplicaCount"], obj["spec"]["maxReplicaCount"]) == (0, 3)
    queue, hold, cron = obj["spec"]["triggers"]
    assert queue["type"] == "metrics-api"
    meta = queue["metadata"]
    assert meta["valueLocation"] == "vllm:num_requests_waiting"
    assert (meta["format"], meta["aggregationType"]) == ("prometheus", "sum")
    assert meta["aggregateFromKubeServiceEndpoints"] == "true"
    assert meta["url"] == (
        f"http://{scaling.metrics_service_name(spec)}.{spec.namespace}.svc.cluster.local:"
        f"{spec.port}/metrics"  # behind the door, vLLM's own port (no gatekeeper in the group)
    )
    assert scaling.metrics_service(spec)["spec"]["ports"][0]["targetPort"] == spec.port
    # The planner sets the target (`infra.plan.elastic`, tests/plan/test_elastic.py).
    assert meta["targetValue"] == str(scaler.queue_per_group)
    # The requests served hold a group: the same leaders; the floor answers both gauges at 0.
    assert hold == {**queue, "name": "running", "metadata": {**meta, **HOLD}}
    floor = scaling.FLOOR_BODY
    assert all(f"{m} 0\n" in floor for m in (meta["valueLocation"], scaling.RUNNING_METRIC))
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
    # Extra triggers follow the queue and the schedule.
    wake = {"type": "metrics-api", "name": "wake", "metadata": {"url": "http://door/wake"}}
    obj = scaling.scaled_object(spec, scaler, [wake])
    names = ["queue", "running", "office-hours", "wake"]
    assert [t["name"] for t in obj["spec"]["triggers"]] == names
    no_schedule = scaling.ScalerSpec(**{**scaler.__dict__, "schedule": None})
    assert [t["name"] for t in scaling.scaled_object(spec, no_schedule)["spec"]["triggers"]] == [
        "queue",
        "running",
    ]


def test_queue_trigger_waits_longer_than_a_busy_leaders_metrics() -> None:
    # Without it the operator's 3 s applies (`scaling.METRICS_TIMEOUT_SECONDS` cites KEDA), less
    # than the 5 s a busy leader's /metrics is allowed; a Go duration or milliseconds
    # (kedacore/keda v2.20.2 pkg/scalers/scalersconfig/typed_config.go).
    spec, scaler = _scaled()
    timeout = scaling.queue_trigger(spec, scaler)["metadata"]["timeout"]
    assert timeout == "10s"
    seconds = int(timeout.removesuffix("s"))
    assert liveness.PROBE_REQUEST_S < seconds < scaler.polling_s
    assert seconds > 3  # the operator's default, which today's render falls back to


def test_schema_check_of_the_committed_keda_copy_catches_a_wrong_scaled_object() -> None:
    spec, scaler = _scaled()
    obj = scaling.scaled_object(spec, scaler)
    obj["spec"]["minReplicas"] = 0
    assert any("minReplicas" in e for e in k8s_schemas.scaled_object_errors(obj))
    obj = scaling.scaled_object(spec, scaler)
    del obj["spec"]["scaleTargetRef"]["name"]
    assert k8s_schemas.scaled_object_errors(obj) != []
    # The committed KEDA copy is the CRD's structure.
    schema = k8s_schemas.scaled_object_schema()
    spec = schema["properties"]["spec"]
    assert spec["required"] == ["scaleTargetRef", "triggers"]
    assert "description" not in str(schema)


def test_an_autoscaled_group_leaves_its_count_to_keda_and_tolerates_the_model_taint() -> None:
    spec, _ = _scaled()
    lws = manifests.leader_worker_set(spec)
    assert "replicas" not in lws["spec"]
    for role in ("leaderTemplate", "workerTemplate"):
        pod = lws["spec"]["leaderWorkerTemplate"][role]["spec"]
        assert pod["tolerations"] == [
            {"operator": "Equal", "key": "gemma-graviton.dev/pool", "value": "model",
             "effect": "NoSchedule"}
        ]  # fmt: skip
    fixed_lws = manifests.leader_worker_set(builders.server_spec(replicas=1))
    assert fixed_lws["spec"]["replicas"] == 1
    assert "tolerations" not in fixed_lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _pod_labels(objects: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Each rendered pod template's labels, by where it is."""
    found = {}
    for obj in objects:
        if obj["kind"] == "LeaderWorkerSet":
            group = obj["spec"]["leaderWorkerTemplate"]
            for part in ("leaderTemplate", "workerTemplate"):
                found[part] = group[part]["metadata"]["labels"]
        elif obj["kind"] == "Deployment":
            found[obj["metadata"]["name"]] = obj["spec"]["template"]["metadata"]["labels"]
    return found


def test_metrics_service_selects_the_leaders_and_the_floor_and_keda_may_read_them() -> None:
    # kedacore/keda v2.20.2 pkg/scalers/metrics_api_scaler.go `getEndpointsUrlsFromServiceURL`:
    # the trigger asks every ready endpoint of this Service, so it must hold the leaders (the
    # queue) and the floor (an endpoint while no leader is Ready), and nothing else.
    cfg, p, spec, _ = _prod()
    service = scaling.metrics_service(spec)
    selector = service["spec"]["selector"]
    pods = _pod_labels(rendered_objects(cfg, p))
    chosen = sorted(where for where, labels in pods.items() if _selects(selector, labels))
    assert chosen == ["gemma-queue-floor", "leaderTemplate"], pods
    # The floor is no group's pod: the LWS controller and the metrics collector select by these.
    floor = pods["gemma-queue-floor"]
    assert manifests.LWS_NAME_LABEL not in floor and manifests.LWS_WORKER_INDEX_LABEL not in floor
    policy = manifests.network_policy(spec)
    metrics_rule = next(
        r
        for r in policy["spec"]["ingress"]
        if r.get("ports", [{}])[0].get("port") == scaling.metrics_port(spec)
    )
    assert scaling.keda_peer() in metrics_rule["from"]
    fixed_policy = manifests.network_policy(builders.planned_spec(today=TODAY))
    assert all(
        scaling.keda_peer() not in rule.get("from", []) for rule in fixed_policy["spec"]["ingress"]
    )


def _floor(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return _one(objects, kind, "gemma-queue-floor")


def test_the_queue_floor_runs_on_the_system_nodes_and_answers_a_zero_queue() -> None:
    # Why a floor: a Service with no ready endpoint errs the trigger, and KEDA never scales a
    # ScaledObject in error to zero (`components.manifests.scaling`'s module doc cites KEDA).
    cfg, p, spec, scaler = _prod()
    objects = rendered_objects(cfg, p)
    deployment = _floor(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == wiring.SYSTEM_LABELS
    assert pod.get("tolerations", []) == []  # never on the tainted model nodes
    (container,) = pod["containers"]
    assert container["image"] == gatekeeper.IMAGE
    amount = {"cpu": "10m", "memory": "16Mi"}
    assert container["resources"] == {"requests": amount, "limits": amount}
    assert restricted_findings(pod) == [] and pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # It listens where the trigger's URL points (the Service's port and target port); it is
    # Ready only while no leader answers /health (KEDA counts ready endpoints only).
    url = scaling.queue_trigger(spec, scaler)["metadata"]["url"]
    port = scaling.metrics_port(spec)
    assert url.endswith(f":{port}/metrics")
    assert [c["containerPort"] for c in container["ports"]] == [port]
    command = container["readinessProbe"]["exec"]["command"]
    assert command[:2] == ["/bin/sh", "-c"]
    assert (
        command[2] == f"! wget -q -T 5 -O /dev/null http://{scaling.leaders_address(spec)}/health"
    )
    assert container["readinessProbe"]["timeoutSeconds"] > 5
    (service_port,) = scaling.metrics_service(spec)["spec"]["ports"]
    assert service_port["port"] == service_port["targetPort"] == port
    conf = _floor(objects, "ConfigMap")["data"][scaling.FLOOR_CONFIG_FILE]
    assert f"listen {port};" in conf
    body = "".join(
        f"# TYPE vllm:num_requests_{m} gauge\\nvllm:num_requests_{m} 0\\n"
        for m in ("waiting", "running")
    )
    assert f'return 200 "{body}";' in conf
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations[gatekeeper.CONFIG_ANNOTATION] == gatekeeper.config_digest(conf)


def test_the_queue_floor_admits_keda_alone_and_the_group_admits_the_floor() -> None:
    # KEDA chart 2.20.2 templates/manager/deployment.yaml: the operator's pods (`app:
    # keda-operator`) in the release namespace are the ones that poll the trigger's endpoints.
    # The group admits the floor to the leaders' health (its readiness asks it).
    cfg, p, spec, _ = _prod()
    objects = rendered_objects(cfg, p)
    policy = _floor(objects, "NetworkPolicy")
    assert policy["spec"]["podSelector"] == {"matchLabels": scaling.floor_selector(spec)}
    assert policy["spec"]["ingress"] == [
        {
            "from": [scaling.keda_peer()],
            "ports": [{"port": scaling.metrics_port(spec), "protocol": "TCP"}],
        }
    ]
    group = _one(objects, "NetworkPolicy", "gemma-group")
    floor = {"podSelector": {"matchLabels": scaling.floor_selector(spec)}}
    rules = [r for r in group["spec"]["ingress"] if floor in r.get("from", [])]
    assert [r["ports"] for r in rules] == [[{"port": spec.port, "protocol": "TCP"}]]


def test_a_fixed_stack_has_no_queue_floor() -> None:
    # A fixed stack has no KEDA (kedacore/keda v2.20.2 is installed on elastic stacks only):
    # nothing polls a floor, and its render stays as pinned (tests/fixtures/dev-render-fixed.txt).
    objects = builders.rendered(today=TODAY)
    assert [o for o in objects if "queue-floor" in o["metadata"]["name"]] == []
    with pytest.raises(ValueError, match="queue floor is for autoscaled stacks"):
        scaling.floor_deployment(builders.planned_spec(today=TODAY))


def test_the_planner_counts_the_floor_on_the_system_nodes() -> None:
    # The scheduler admits a pod on a node only while the requests of its pods fit allocatable
    # (kubernetes v1.35 pkg/scheduler/framework/plugins/noderesources/fit.go): the system group is
    # sized for every pod on it, the floor's requests included.
    cfg, p, _, _ = _prod()
    system = elastic.system_group(cfg)
    deployment = _floor(rendered_objects(cfg, p), "Deployment")
    replicas = deployment["spec"]["replicas"]
    assert f"queue-floor x{replicas}" in system.pods
    (counted,) = [pod for pod in elastic.SYSTEM_PODS if pod[0] == "queue-floor"]
    pod = deployment["spec"]["template"]["spec"]
    requests = pod["containers"][0]["resources"]["requests"]
    assert counted == (
        "queue-floor",
        int(requests["cpu"].removesuffix("m")),
        int(requests["memory"].removesuffix("Mi")),
        replicas,
    )
    # Two nodes at least, so the floor's two pods can be spread and one drained at a time.
    assert system.nodes >= replicas == 2


def test_the_queue_floor_spreads_two_pods_and_rolls_out_while_they_are_unready() -> None:
    # Softly (`scaling.floor_deployment` cites the scheduler): the pods go to different system
    # nodes when there are two, and both still run on one.
    cfg, p, spec, _ = _prod()
    deployment = _floor(rendered_objects(cfg, p), "Deployment")
    assert deployment["spec"]["replicas"] == scaling.FLOOR_REPLICAS == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": scaling.floor_selector(spec)},
        }
    ]
    assert "affinity" not in pod  # no hard anti-affinity: a lone system node still runs both
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in scaling.floor_selector(spec).items())
    # While a leader serves every floor pod is unready, and a rollout must still move (the
    # Deployment controller's rule, cited in `scaling.floor_deployment`); `pulumi up` must not
    # wait for Ready.
    replicas = deployment["spec"]["replicas"]
    rolling = deployment["spec"]["strategy"]["rollingUpdate"]
    all_pods = replicas + rolling["maxSurge"]
    new_unavailable = rolling["maxSurge"]  # the surge pod, unready like the rest
    assert all_pods - (replicas - rolling["maxUnavailable"]) - new_unavailable > 0
    assert rolling["maxUnavailable"] < replicas  # one floor pod always stays
    wait = deployment["metadata"]["annotations"]["pulumi.com/waitFor"]
    assert wait == f"jsonpath={{.status.updatedReplicas}}={replicas}"


def _eviction_allowed(budget: dict[str, Any], ready: list[bool], evicted: int) -> bool:
    """kubernetes v1.35 pkg/registry/core/pod/storage/eviction.go `Create` for a Running pod
    under one budget with an integer `minAvailable`: a pod that is not Ready goes at once under
    `AlwaysAllow`, or under `IfHealthyBudget` (the default) while currentHealthy >=
    desiredHealthy > 0; otherwise `checkAndDecrement` needs disruptionsAllowed > 0, which the
    disruption controller sets to currentHealthy - desiredHealthy (pkg/controller/disruption/
    disruption.go `updatePdbStatus`), currentHealthy counting Ready pods only
    (`countHealthyPods`)."""
    healthy = sum(ready)
    desired = budget["spec"]["minAvailable"]
    if not ready[evicted]:
        if budget["spec"].get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
            return True
        return healthy >= desired > 0
    return healthy - desired > 0


def test_a_drain_leaves_a_ready_floor_pod_and_never_stalls_while_leaders_serve() -> None:
    cfg, p, spec, _ = _prod()
    objects = rendered_objects(cfg, p)
    budget = _floor(objects, "PodDisruptionBudget")
    assert budget["spec"] == {
        "minAvailable": 1,
        "selector": {"matchLabels": scaling.floor_selector(spec)},
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
    # It guards the floor's pods and no leader's (one budget per pod: eviction.go refuses to
    # evict a pod that two budgets select).
    pods = _pod_labels(objects)
    chosen = [w for w, labels in pods.items() if _selects(scaling.floor_selector(spec), labels)]
    assert chosen == ["gemma-queue-floor"], pods
    replicas = _floor(objects, "Deployment")["spec"]["replicas"]
    # No leader Ready: both floor pods are; one may go, the last one may not.
    assert _eviction_allowed(budget, [True] * replicas, 0)
    assert not _eviction_allowed(budget, [True] + [False] * (replicas - 1), 0)
    # A leader Ready: no floor pod is, and a drain takes them (the leaders are the endpoints).
    assert _eviction_allowed(budget, [False] * replicas, 0)
    default = {**budget, "spec": {**budget["spec"], "unhealthyPodEvictionPolicy": None}}
    assert not _eviction_allowed(default, [False] * replicas, 0), (
        "under IfHealthyBudget a drain would stall whenever the model serves"
    )


def test_zero_groups_within_the_cooldown_and_one_poll() -> None:
    # Zero at the first poll after the last active one plus the cooldown (the module doc of
    # `components.manifests.scaling`, "The bound").
    cfg, p, spec, scaler = _prod()
    obj = scaling.scaled_object(spec, scaler)
    bound = obj["spec"]["cooldownPeriod"] + obj["spec"]["pollingInterval"]
    assert scaler.to_zero_s == bound == 375
    e = elastic.elastic_plan(cfg, p, TODAY)
    assert e is not None
    # The alarm waits for zero groups and the autoscaler's removal of their nodes (its
    # --scale-down-unneeded-time, components/autoscaling.py), and past the slowest wake-up.
    unneeded = autoscaler_values("c", "r", {}, 1, "v")["extraArgs"]
    assert unneeded["scale-down-unneeded-time"] == f"{elastic.SCALE_DOWN_UNNEEDED_SECONDS // 60}m0s"
    assert e.idle_alarm_s >= bound + elastic.SCALE_DOWN_UNNEEDED_SECONDS
    assert e.idle_alarm_s > e.wake_without_volume_s and e.idle_alarm_s % 60 == 0
    assert "375 s" in dict(elastic.describe(e))["back to zero"]


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
    # Its account, bound to its role by EKS Pod Identity and named by no IRSA annotation:
    # test_addons.py test_no_pod_role_is_named_by_irsa, on the chart the component installs.
    values = autoscaler_values("c", "us-east-1", wiring.SYSTEM_LABELS, 2985, "v1.35.2")
    assert values["nodeSelector"] == wiring.SYSTEM_LABELS
    assert values["image"]["tag"] == "v1.35.2"


def test_an_autoscaler_release_is_pinned_for_each_supported_minor_and_only_those() -> None:
    # kubernetes/autoscaler cluster-autoscaler/README.md: the latest release of the cluster's
    # minor; 1.35 waits for resource.k8s.io/v1, served from 1.34 only (kubernetes/autoscaler
    # issue 9244). Every version the add-on table accepts has its own release.
    assert set(elastic.AUTOSCALER_TAGS) == set(addons.ADDON_VERSIONS)
    for minor, tag in elastic.AUTOSCALER_TAGS.items():
        assert tag.startswith(f"v{minor}."), (minor, tag)
        assert elastic.autoscaler_tag(minor) == tag
    assert elastic.autoscaler_tag("1.32") == "v1.32.7"  # not 1.35's, which never scales 1.32
    # A minor without a release is refused.
    with pytest.raises(ConfigError) as refused:
        elastic.autoscaler_tag("1.31")
    assert str(refused.value) == (
        "`kubernetesVersion` 1.31 has no pinned Cluster Autoscaler release "
        "(infra/plan/elastic.py AUTOSCALER_TAGS); use 1.35, or add the latest "
        "cluster-autoscaler v1.31.x tag"
    )


def _keda_prometheus_value(body: bytes, value_location: str) -> float:
    """KEDA's reading of a Prometheus text answer, for a `valueLocation` without labels
    (kedacore/keda v2.20.2 pkg/scalers/metrics_api_scaler.go `getValueFromPrometheusResponse`):
    the family of that name, its first sample's value; a missing family is an error."""
    text = body.decode("utf-8").replace("\r\n", "\n")
    types: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
        elif line and not line.startswith("#"):
            name, value = line.split("{")[0].split(" ")[0], line.rsplit(" ", 1)[1]
            if name == value_location:
                assert types.get(name, "untyped") in ("gauge", "counter", "untyped"), line
                return float(value)
    raise AssertionError(f"metric '{value_location}' not found")


NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


@pytest.mark.skipif(NGINX is None, reason="apt-get install -y nginx-light (Debian, Ubuntu)")
def test_real_nginx_answers_the_floor_body_keda_reads_as_zero(tmp_path: Path) -> None:
    # The floor's own config, run by Debian's nginx on loopback: the exact body, and KEDA's
    # reading of it (v2.20.2 pkg/scalers/metrics_api_scaler.go: expfmt's text parser, the first
    # sample of the `valueLocation` family, an HTTP status other than 200 an error).
    (tmp_path / "run").mkdir()
    port = free_port()
    conf = tmp_path / scaling.FLOOR_CONFIG_FILE
    conf.write_text(
        scaling.floor_nginx_conf(
            f"127.0.0.1:{port}",
            run_dir=str(tmp_path / "run"),
            user="root" if os.geteuid() == 0 else None,
        )
    )
    with door_harness.nginx_running(conf, port):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            assert reply.status == 200
            body = reply.read()
        assert body == scaling.FLOOR_BODY.encode()
        assert body == (
            b"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n"
            b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"
        )
        for metric in (scaling.QUEUE_METRIC, scaling.RUNNING_METRIC):
            assert _keda_prometheus_value(body, metric) == 0.0
        with pytest.raises(urllib.error.HTTPError) as other:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)
        assert other.value.code == 404


@pytest.mark.parametrize("metric", [scaling.QUEUE_METRIC, scaling.RUNNING_METRIC])
def test_keda_reading_of_the_real_vllm_families(metric: str) -> None:
    # Each trigger's series is one real vLLM 0.31 exports, with its type (the rehearsal's
    # capture, tests/fixtures/vllm/metrics-v0.31.json): the floor's 0 sums like with like.
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "vllm" / "metrics-v0.31.json"
    family = json.loads(fixture.read_text())["families"][metric]
    assert family["type"] == "gauge" and family["samples"] == [metric]
    assert f"# TYPE {metric} {family['type']}\n" in scaling.FLOOR_BODY
    with pytest.raises(AssertionError, match="not found"):
        _keda_prometheus_value(b"vllm:num_requests_running 3\n", scaling.QUEUE_METRIC)


def _readiness_against(command: str, spec: manifests.ServerSpec, address: str) -> int:
    """The floor's readiness command, run here with the leaders' Service replaced by `address`
    (the pod's busybox wget and this machine's wget read the same flags)."""
    local = command.replace(scaling.leaders_address(spec), address)
    return subprocess.run(["/bin/sh", "-c", local], check=False, timeout=30).returncode


@pytest.mark.skipif(shutil.which("wget") is None, reason="needs wget (Debian's wget)")
def test_the_floor_is_ready_only_while_no_leader_answers_health() -> None:
    _cfg, _p, spec, _scaler = _prod()
    command = scaling.floor_readiness(spec)["exec"]["command"][2]
    with answering("") as port:
        # A Ready leader answers: the floor steps aside (not Ready).
        assert _readiness_against(command, spec, f"127.0.0.1:{port}") != 0
    # No Ready leader: the Service has no endpoints and the connection is refused at once.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    assert _readiness_against(command, spec, f"127.0.0.1:{closed}") == 0
