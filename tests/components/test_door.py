"""An elastic stack's door (components/manifests/door.py): the gatekeeper out of the group, on
the system nodes, in front of the leaders' Service; and fixed stacks rendered exactly as before."""

from __future__ import annotations

from typing import Any

import pytest

from components import manifests
from components.manifests import door, gatekeeper, gatekeeper_map, probes, scaling
from infra.adapters import render
from infra.adapters.wiring import SYSTEM_LABELS
from infra.plan import sleep
from tests import builders, render_fixtures
from tests.components.test_semantics import _one
from tests.fakes import k8s_schemas


def _prod() -> tuple[Any, Any, list[dict[str, Any]]]:
    return (*builders.planned("prod"), builders.rendered("prod"))


def test_dev_renders_the_objects_it_rendered_before_the_door() -> None:
    # A fixed stack has no door: its objects are the committed text of tests/fixtures/rendered/dev
    # (the five it rendered before elastic stacks got a door, and the group's programs since).
    kinds = [name.split("-", 2)[1] for name in render_fixtures.committed("dev")]
    assert kinds == [
        "namespace", "configmap", "configmap", "networkpolicy", "leaderworkerset", "service"
    ]  # fmt: skip
    # That the text is what dev renders now: tests/test_regen.py.


def test_prod_is_elastic_and_renders_a_door() -> None:
    # Its objects against the real schemas: tests/components/test_manifests.py, every stack.
    cfg, _, objects = _prod()
    assert cfg.elastic
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert {("Deployment", "gemma-door"), ("Service", "gemma-leaders")} <= kinds


def test_the_load_balancer_selects_the_door_and_the_group_has_no_gatekeeper() -> None:
    _, _, objects = _prod()
    endpoint = _one(objects, "Service", "gemma")
    assert endpoint["spec"]["selector"] == door.selector(builders.planned_spec("prod"))
    lws = _one(objects, "LeaderWorkerSet", "gemma-vllm")
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    assert [c["name"] for c in leader["containers"]] == ["vllm"]
    assert "--host=0.0.0.0" in leader["containers"][0]["args"]
    # No gatekeeper beside it: the kubelet asks the check process, which asks vLLM's /health
    # until the preStop fails it, so a draining leader leaves the leaders' Service.
    engine = leader["containers"][0]
    assert engine["readinessProbe"] == {
        "httpGet": {"path": "/ready", "port": probes.LIVENESS_PORT},
        "periodSeconds": 5,
        "failureThreshold": 1,
        "timeoutSeconds": 5,
    }
    assert f"ready-port={probes.LIVENESS_PORT}" in engine["lifecycle"]["preStop"]["exec"]["command"]


def test_the_door_runs_on_the_system_nodes_and_rolls_with_its_config() -> None:
    _, _, objects = _prod()
    deployment = _one(objects, "Deployment", "gemma-door")
    template = deployment["spec"]["template"]
    assert template["spec"]["nodeSelector"] == SYSTEM_LABELS
    assert [c["name"] for c in template["spec"]["containers"]] == [gatekeeper.CONTAINER]
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    files = _one(objects, "ConfigMap", "gemma-gatekeeper")["data"]
    assert template["metadata"]["annotations"][gatekeeper.CONFIG_ANNOTATION] == (
        gatekeeper.config_digest(files)
    )


def test_the_door_drains_its_streams_when_it_is_replaced() -> None:
    _, p, objects = _prod()
    spec = builders.planned_spec("prod")
    pod = _one(objects, "Deployment", "gemma-door")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    # Every stream in flight may run its whole reply timeout after the door stops accepting.
    assert pod["terminationGracePeriodSeconds"] == spec.drain.grace_s
    assert spec.drain.grace_s >= spec.drain.accept_s + p.front_door.reply_timeout_seconds
    assert container["lifecycle"]["preStop"]["exec"]["command"] == (
        gatekeeper.pre_stop(spec.drain, gatekeeper.RUN_DIR)
    )
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    files = _one(objects, "ConfigMap", "gemma-gatekeeper")["data"]
    assert "location = /ready" in files[gatekeeper.CONFIG_FILE]
    # The leaders behind it keep their idle check, after the window its pool leaves them in,
    # and never drain on their own (vLLM would refuse what the pool still sends with a 500).
    group = _one(objects, "LeaderWorkerSet", "gemma-vllm")["spec"]["leaderWorkerTemplate"]
    (engine,) = group["leaderTemplate"]["spec"]["containers"]
    hook = engine["lifecycle"]["preStop"]["exec"]["command"]
    assert hook[:3] == ["python3", "/opt/gemma-graviton/drain.py", "role=leader"]
    assert f"door-port={gatekeeper.PORT}" in hook
    assert not [a for a in engine["args"] if a.startswith("--shutdown-timeout")]


def test_an_elastic_stack_keeps_a_group_serving_through_a_node_drain() -> None:
    # The budget follows the most groups that may run (maxGroups), not the fewest (0).
    cfg, p, objects = _prod()
    assert (cfg.min_groups, p.replicas) == (0, 3)
    budget = _one(objects, "PodDisruptionBudget", "gemma-vllm-groups")
    assert budget["spec"]["maxUnavailable"] == 1


def test_the_doors_config_reaches_the_leaders_service_and_answers_asleep() -> None:
    cfg, p, objects = _prod()
    files = _one(objects, "ConfigMap", "gemma-gatekeeper")["data"]
    conf, script = files[gatekeeper.CONFIG_FILE], files[gatekeeper.SCRIPT_FILE]
    assert "server gemma-leaders.gemma-graviton.svc.cluster.local:8000;" in conf
    assert "server 127.0.0.1:" not in conf
    # An unreachable Service (no group) is the asleep answer; a full one (`max_conns`) is busy.
    assert "error_page 599 =503 /.gatekeeper/asleep;" in conf
    assert "server gemma-leaders.gemma-graviton.svc.cluster.local:8000 max_conns=27;" in conf
    assert "location = /wake" in conf
    wake = sleep.door_asleep(cfg, p).wake_seconds
    assert f'"wakeSeconds": {wake}' in script
    assert "mirror /.gatekeeper/wake-mark;" in conf and "keepAwake" not in script


def test_per_client_limits_stay_per_client_grammar_and_tokens_included() -> None:
    limits = builders.gatekeeper_limits(
        client_concurrent_requests=4,
        client_requests_per_minute=240,
        client_connections=6,
        max_schema_bytes=6125,
        token_tiers=((1024, 4), (2048, 2)),
    )
    spec = builders.elastic_server_spec(limits=limits)
    # The door's config is the plan's per-client limits, grammar slots and tiers included.
    conf = gatekeeper.nginx_conf(limits, page_root=None, **door.config_where(spec))
    assert gatekeeper_map.files(spec)[gatekeeper.CONFIG_FILE] == conf


def test_vllm_admits_the_door_the_collector_and_keda_only() -> None:
    objects, spec = builders.rendered("prod"), builders.planned_spec("prod")
    policy = _one(objects, "NetworkPolicy", "gemma-group")
    ingress = policy["spec"]["ingress"]
    open_rules = [rule for rule in ingress if "from" not in rule]
    assert open_rules == []  # nothing from anywhere
    (to_vllm,) = [r for r in ingress if r.get("ports")]
    assert to_vllm["ports"] == [{"port": spec.port, "protocol": "TCP"}]
    peers = to_vllm["from"]
    assert {"podSelector": {"matchLabels": door.selector(spec)}} in peers
    assert scaling.keda_peer() in peers
    # The door's own policy: its listener open (the NLB filters), its wake port KEDA's only.
    door_policy = _one(objects, "NetworkPolicy", "gemma-door")["spec"]["ingress"]
    assert door_policy[0] == {"ports": [{"port": gatekeeper.PORT, "protocol": "TCP"}]}
    assert door_policy[1]["ports"] == [{"port": gatekeeper.METRICS_PORT, "protocol": "TCP"}]


def test_the_wake_trigger_joins_the_scaled_object_and_fits_its_schema() -> None:
    spec = builders.elastic_server_spec(namespace="gemma-graviton")
    trigger = door.wake_trigger(spec)
    assert trigger["metadata"]["url"] == (
        "http://gemma-door-wake.gemma-graviton.svc.cluster.local:9090/wake"
    )
    scaled = scaling.scaled_object(spec, builders.scaler_spec(), [trigger])
    assert scaled["spec"]["triggers"][-1] == trigger
    assert k8s_schemas.scaled_object_errors(scaled) == []
    # The rendered one wakes on the door's flag too.
    (scaled,) = [o for o in builders.rendered("prod") if o["kind"] == "ScaledObject"]
    assert scaled["spec"]["triggers"][-1] == door.wake_trigger(builders.planned_spec("prod"))


def test_a_fixed_stack_has_no_door() -> None:
    spec = builders.server_spec()
    assert spec.door is None
    assert not [o for o in render.all_objects(spec) if o["kind"] == "Deployment"]
    # Its leaders' readiness is their gatekeeper's, which the drain marker fails.
    lws = manifests.leader_worker_set(spec)["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    engine = next(c for c in lws["spec"]["containers"] if c["name"] == "vllm")
    assert engine["readinessProbe"]["httpGet"]["path"] == "/health"
    assert not [a for a in engine["lifecycle"]["preStop"]["exec"]["command"] if "ready-port" in a]
    with pytest.raises(ValueError, match="has no door"):
        door.wake_trigger(spec)
