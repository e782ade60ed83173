"""The rendered objects of every shipped stack hold against Kubernetes' own semantics
(`components.manifests.semantics`), and each rule names a fault seeded into a render.

The rules and the kubelet, scheduler and controller sources they encode are in the module; these
tests run them over `stacks/*.yaml` and the `--set` variants below, then break one object each.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from components.manifests import semantics
from components.manifests.pod_world import World
from components.manifests.spec import MODEL_TAINT
from infra.adapters.semantics import world
from infra.plan import catalog
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from tests import builders

STACKS = sorted(
    p.name.split(".")[1] for p in (Path(__file__).parents[2] / "stacks").glob("Pulumi.*.yaml")
)
VARIANTS = [
    *[(s, {}) for s in STACKS],
    *[(s, {"weights": "int8"}) for s in STACKS],
    # dev made elastic: the door, the system group and the model taint on a one-node group.
    ("dev", {"maxGroups": 2, "minGroups": 0}),
]


def _stack(stack: str, sets: dict[str, Any]) -> tuple[list[dict[str, Any]], World]:
    return builders.rendered(stack, sets), world(*builders.planned(stack, sets))


def _one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (obj,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def _leader(objects: list[dict[str, Any]]) -> dict[str, Any]:
    group = _one(objects, "LeaderWorkerSet", "gemma-vllm")
    return group["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]


def _container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    (container,) = [c for c in pod["containers"] if c["name"] == name]
    return container


@pytest.mark.parametrize(("stack", "sets"), VARIANTS)
def test_every_stack_holds_against_kubernetes_semantics(stack: str, sets: dict[str, Any]) -> None:
    assert {"dev", "prod"} <= set(STACKS), "the variants cover every shipped stack"
    objects, stack_world = _stack(stack, sets)
    assert semantics.check(objects, stack_world) == []


# -- named probe ports -------------------------------------------------------------------------


def test_the_check_catches_a_probe_on_another_containers_port_which_dev_asks_by_number() -> None:
    objects, _ = _stack("dev", {})
    # The fault the dev render had: the engine's probes on the gatekeeper's port name.
    _container(_leader(objects), "vllm")["readinessProbe"]["httpGet"]["port"] = "gatekeeper"
    assert semantics.unresolved_ports(objects) == [
        "LeaderWorkerSet/gemma-vllm leaderTemplate vllm readinessProbe port 'gatekeeper'"
    ]
    # The dev engine probes the gatekeeper's probe port by number: test_manifest_fields.py.


# -- taints ------------------------------------------------------------------------------------


def test_the_quantize_job_of_an_elastic_stack_tolerates_the_model_taint() -> None:
    objects, stack_world = _stack("prod", {"weights": "int8"})
    jobs = [o for o in objects if o["kind"] == "Job" and "quantize" in o["metadata"]["name"]]
    assert jobs, "prod with weights int8 renders its quantize Job"
    for job in jobs:
        # The fault the Job had: no toleration.
        del job["spec"]["template"]["spec"]["tolerations"]
    assert semantics.unschedulable(objects, stack_world) == [
        f"Job/{job['metadata']['name']} fits no node group (model: taint "
        f"{MODEL_TAINT['key']}=model:NoSchedule not tolerated; system: nodeSelector "
        "{'gemma-graviton.dev/pool': 'model', 'node.kubernetes.io/instance-type': 'm7g.2xlarge'} "
        "not among its labels)"
        for job in jobs
    ]


# -- Services ----------------------------------------------------------------------------------


def test_a_service_selecting_no_pod_or_the_workers_is_named() -> None:
    objects, _ = _stack("dev", {})
    service = _one(objects, "Service", "gemma")
    service["spec"]["selector"]["leaderworkerset.sigs.k8s.io/name"] = "gemma-vlm"
    assert semantics.unserved_services(objects) == [
        "Service/gemma selector {'leaderworkerset.sigs.k8s.io/name': 'gemma-vlm', "
        "'leaderworkerset.sigs.k8s.io/worker-index': '0'} matches no pod"
    ]
    # Without the worker index the selector takes the headless ranks, which serve no port:
    # the controller adds `worker-index` 1.. to them (lws v0.10.0 pod_webhook.go).
    service["spec"]["selector"]["leaderworkerset.sigs.k8s.io/name"] = "gemma-vllm"
    del service["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"]
    assert semantics.unserved_services(objects) == [
        "Service/gemma port 80 targetPort 'gatekeeper': LeaderWorkerSet/gemma-vllm "
        "workerTemplate declares no such TCP port"
    ]


@pytest.mark.parametrize(
    ("stack", "pool", "other", "where"),
    [
        ("dev", "model", "system", "LeaderWorkerSet/gemma-vllm leaderTemplate"),
        ("prod", "system", "model", "Deployment/gemma-door"),
    ],
)
def test_a_load_balancer_targeting_every_node_or_another_pool_is_named(
    stack: str, pool: str, other: str, where: str
) -> None:
    """dev's Service selects the leaders (model pool), prod's the door (system pool)."""
    objects, stack_world = _stack(stack, {})
    annotations = _one(objects, "Service", "gemma")["metadata"]["annotations"]
    assert annotations[semantics.TARGET_NODES] == f"gemma-graviton.dev/pool={pool}"
    annotations[semantics.TARGET_NODES] = f"gemma-graviton.dev/pool={other}"
    assert semantics.untargeted_load_balancers(objects, stack_world) == [
        f"Service/gemma {semantics.TARGET_NODES} 'gemma-graviton.dev/pool={other}': node group "
        f"{pool} of {where} lacks them"
    ]
    annotations[semantics.TARGET_NODES] = "gemma-graviton.dev/pool"  # any value: every pool
    assert semantics.untargeted_load_balancers(objects, stack_world) == []
    del annotations[semantics.TARGET_NODES]
    assert semantics.untargeted_load_balancers(objects, stack_world) == [
        f"Service/gemma names no {semantics.TARGET_NODES}: every node of the cluster is a target"
    ]


@pytest.mark.parametrize("wrong", ["name", "number"])
def test_a_target_port_no_selected_pod_declares_is_named(wrong: str) -> None:
    objects, stack_world = _stack("prod", {})
    door = _one(objects, "Deployment", "gemma-door")["spec"]["template"]["spec"]
    declared = [p["containerPort"] for c in door["containers"] for p in c.get("ports", [])]
    target: Any = "gatekeper" if wrong == "name" else max(declared) + 1
    _one(objects, "Service", "gemma-door-wake")["spec"]["ports"][0]["targetPort"] = target
    assert semantics.unserved_services(objects, stack_world) == [
        f"Service/gemma-door-wake port 9090 targetPort {target!r}: Deployment/gemma-door declares "
        "no such TCP port"
    ]


def test_the_leaders_undeclared_port_behind_a_door_is_a_named_exception() -> None:
    # FindPort takes a number as is, but the check asks a targeted port to be declared or
    # excepted: vLLM behind a door declares none (policies/rules.py leaders-behind-gatekeeper).
    objects, stack_world = _stack("prod", {})
    assert "ports" not in _container(_leader(objects), "vllm")
    leader = "LeaderWorkerSet/gemma-vllm leaderTemplate"
    assert set(stack_world.undeclared) == {(leader, 8000)}
    bare = World(stack_world.node_groups, stack_world.created)
    assert semantics.unserved_services(objects, bare) == [
        f"Service/{name} port 8000 targetPort 8000: {leader} declares no such TCP port"
        for name in ("gemma-leaders", "gemma-leader-metrics")
    ]
    assert semantics.loose_network_policies(objects, bare) == [
        "NetworkPolicy/gemma-group ingress[1] port 8000: no selected pod declares it"
    ]
    assert semantics.check(objects, stack_world) == []
    # A fixed stack excepts no port.
    assert _stack("dev", {})[1].undeclared == {}


# -- NetworkPolicies ---------------------------------------------------------------------------


def test_a_policy_or_a_peer_selecting_no_pod_is_named() -> None:
    objects, stack_world = _stack("prod", {})
    policy = _one(objects, "NetworkPolicy", "gemma-door")
    policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] = "dor"
    assert semantics.loose_network_policies(objects, stack_world) == [
        "NetworkPolicy/gemma-door podSelector matches no pod"
    ]
    # A same-namespace peer selecting no pod.
    policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] = "door"
    group = _one(objects, "NetworkPolicy", "gemma-group")
    door_peer = group["spec"]["ingress"][1]["from"][0]
    door_peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"] = "gema"
    (fault,) = semantics.loose_network_policies(objects, stack_world)
    assert fault.startswith("NetworkPolicy/gemma-group ingress[1] peer ")
    assert fault.endswith(" matches no pod")


def test_a_policy_port_no_selected_pod_declares_is_named() -> None:
    objects, _ = _stack("dev", {})
    policy = _one(objects, "NetworkPolicy", "gemma-group")
    policy["spec"]["ingress"][1]["ports"][0]["port"] = 8000  # vLLM's loopback port
    assert semantics.loose_network_policies(objects) == [
        "NetworkPolicy/gemma-group ingress[1] port 8000: no selected pod declares it"
    ]
    leader = "LeaderWorkerSet/gemma-vllm leaderTemplate"
    allowed = World(undeclared={(leader, 8000): "a documented exception"})
    assert semantics.loose_network_policies(objects, allowed) == []


# -- Secrets and ConfigMaps --------------------------------------------------------------------


def test_the_program_creates_the_secrets_the_pods_name() -> None:
    objects, stack_world = _stack("dev", {})
    assert semantics.missing_references(objects, stack_world) == []
    # Without the program's Secrets (a rendered directory applied as is) both are named.
    assert semantics.missing_references(objects, World()) == [
        "LeaderWorkerSet/gemma-vllm leaderTemplate volume hf-token: Secret gemma-hf-token is "
        "not created",
        "LeaderWorkerSet/gemma-vllm leaderTemplate volume gatekeeper-key: Secret gemma-api-key "
        "is not created",
        "LeaderWorkerSet/gemma-vllm leaderTemplate vllm env VLLM_API_KEY: Secret gemma-api-key "
        "is not created",
        "LeaderWorkerSet/gemma-vllm workerTemplate volume hf-token: Secret gemma-hf-token is "
        "not created",
    ]


def test_a_missing_key_or_config_map_is_named() -> None:
    objects, stack_world = _stack("prod", {})
    door = _one(objects, "Deployment", "gemma-door")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in door["volumes"]}
    volumes["gatekeeper-key"]["secret"]["items"][1]["key"] = "engine.conf"
    volumes["gatekeeper-config"]["configMap"]["name"] = "gemma-gatekeeper-old"
    (key,) = [e for e in _container(_leader(objects), "vllm")["env"] if e["name"] == "VLLM_API_KEY"]
    key["valueFrom"]["secretKeyRef"]["key"] = "engine"
    assert semantics.missing_references(objects, stack_world) == [
        "LeaderWorkerSet/gemma-vllm leaderTemplate vllm env VLLM_API_KEY: Secret gemma-api-key "
        "has no key 'engine'",
        "Deployment/gemma-door volume gatekeeper-config: ConfigMap gemma-gatekeeper-old is not "
        "created",
        "Deployment/gemma-door volume gatekeeper-key: Secret gemma-api-key has no key "
        "'engine.conf'",
    ]


def test_a_config_map_item_the_map_lacks_is_named() -> None:
    objects, stack_world = _stack("prod", {"weights": "int8"})
    (code,) = [
        o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-code")
    ]
    first = next(iter(code["data"]))
    del code["data"][first]
    (job,) = [o for o in objects if o["kind"] == "Job"]
    assert semantics.missing_references(objects, stack_world) == [
        f"Job/{job['metadata']['name']} volume code: ConfigMap {code['metadata']['name']} has "
        f"no key {first!r}"
    ]


def test_projected_sources_env_from_and_pull_secrets_count_and_optional_ones_do_not() -> None:
    pod = {
        "containers": [
            {
                "name": "app",
                "envFrom": [
                    {"configMapRef": {"name": "settings"}},
                    {"secretRef": {"name": "extra", "optional": True}},
                ],
            }
        ],
        "imagePullSecrets": [{"name": "registry"}],
        "volumes": [
            {
                "name": "both",
                "projected": {
                    "sources": [
                        {"secret": {"name": "token", "items": [{"key": "t", "path": "t"}]}},
                        {"serviceAccountToken": {"path": "sa"}},
                    ]
                },
            }
        ],
    }
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "app", "namespace": "ns"},
        "spec": {"template": {"metadata": {"labels": {"app": "a"}}, "spec": pod}},
    }
    token = {"kind": "Secret", "metadata": {"name": "token", "namespace": "ns"}, "data": {"u": ""}}
    assert semantics.missing_references([deployment, token]) == [
        "Deployment/app volume both: Secret token has no key 't'",
        "Deployment/app app envFrom: ConfigMap settings is not created",
        "Deployment/app imagePullSecrets: Secret registry is not created",
    ]


# -- claims ------------------------------------------------------------------------------------


def _volume(stack_world: World, name: str) -> dict[str, Any]:
    (pv,) = [o for o in stack_world.created if o["metadata"]["name"] == name]
    return pv


@pytest.mark.parametrize(
    ("field", "value", "fault"),
    [
        (
            "capacity",
            {"storage": "8Gi"},
            "volume gemma-graviton-models-gemma-vllm-0 is smaller than the claim",
        ),
        ("storageClassName", "gp2", "volume class 'gp2' is not 'gemma-graviton-gp3'"),
        (
            "accessModes",
            ["ReadOnlyMany"],
            "volume access modes ['ReadOnlyMany'] lack ['ReadWriteOnce']",
        ),
    ],
)
def test_a_volume_that_does_not_satisfy_its_claim_is_named(
    field: str, value: Any, fault: str
) -> None:
    objects, stack_world = _stack("prod", {"weights": "int8"})
    stack_world = copy.deepcopy(stack_world)
    _volume(stack_world, "gemma-graviton-models-gemma-vllm-0")["spec"][field] = value
    (job,) = [o["metadata"]["name"] for o in objects if o["kind"] == "Job"]
    assert semantics.unbound_claims(objects, stack_world) == [
        f"Job/{job} claim models-gemma-vllm-0: {fault}",
        f"LeaderWorkerSet/gemma-vllm leaderTemplate claim models-gemma-vllm-0: {fault}",
    ]


def test_a_volume_in_another_zone_than_the_nodes_is_named() -> None:
    objects, stack_world = _stack("dev", {"weights": "int8"})
    stack_world = copy.deepcopy(stack_world)
    pv = _volume(stack_world, "gemma-graviton-models-gemma-vllm-0")
    term = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]
    term["matchExpressions"][0]["values"] = ["us-west-2c"]
    fault = "volume's nodeAffinity admits no node of its pods' groups (zones ['us-west-2a'])"
    (job,) = [o["metadata"]["name"] for o in objects if o["kind"] == "Job"]
    assert semantics.unbound_claims(objects, stack_world) == [
        f"Job/{job} claim models-gemma-vllm-0: {fault}",
        f"LeaderWorkerSet/gemma-vllm leaderTemplate claim models-gemma-vllm-0: {fault}",
    ]


def test_a_claim_that_is_not_created_or_has_no_class_is_named() -> None:
    objects, stack_world = _stack("dev", {"weights": "int8"})
    (job,) = [o for o in objects if o["kind"] == "Job"]
    job_pod = job["spec"]["template"]["spec"]
    (out,) = [v for v in job_pod["volumes"] if "persistentVolumeClaim" in v]
    out["persistentVolumeClaim"]["claimName"] = "models-gemma-vllm-9"
    # The group's claim without its volume or its class: nothing provisions it.
    bare = World(stack_world.node_groups, [o for o in stack_world.created if o["kind"] == "Secret"])
    objects = [o for o in objects if o["kind"] != "StorageClass"]
    assert semantics.unbound_claims(objects, bare) == [
        f"Job/{job['metadata']['name']} claim models-gemma-vllm-9 is not created",
        "LeaderWorkerSet/gemma-vllm leaderTemplate claim models-gemma-vllm-0: no volume is "
        "bound to it and its class 'gemma-graviton-gp3' is not created",
    ]


# -- fit ---------------------------------------------------------------------------------------


def test_a_pod_larger_than_the_nodes_allocatable_is_named() -> None:
    objects, stack_world = _stack("dev", {})
    (model,) = stack_world.node_groups
    engine = _container(_leader(objects), "vllm")
    engine["resources"]["requests"]["memory"] = f"{int(model.memory_mib) + 1}Mi"
    assert semantics.unschedulable(objects, stack_world) == [
        f"LeaderWorkerSet/gemma-vllm leaderTemplate fits no node group (model: requests "
        f"{int(model.memory_mib) + 1 + catalog.GATEKEEPER_MEMORY_MIB} MiB, "
        f"{model.memory_mib:.0f} MiB left per node)"
    ]


def test_an_init_container_counts_as_its_largest_not_its_sum() -> None:
    pod = {
        "initContainers": [
            {"name": "a", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "2", "memory": "3Gi"}}},
        ],
        "containers": [
            {"name": "c", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
            {"name": "d", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
        ],
    }
    # The example of kubernetes v1.35 noderesources/fit.go `computePodResourceRequest`.
    assert semantics.pod_requests(pod) == (3, 3 * 2**30)
    sidecar = {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}}
    pod["initContainers"].insert(0, sidecar)
    assert semantics.pod_requests(pod) == (3.5, 3 * 2**30)


def test_a_pod_selecting_a_pool_no_group_has_is_named() -> None:
    objects, stack_world = _stack("prod", {})
    door = _one(objects, "Deployment", "gemma-door")["spec"]["template"]["spec"]
    door["nodeSelector"] = {"gemma-graviton.dev/pool": "door"}
    assert semantics.unschedulable(objects, stack_world) == [
        "Deployment/gemma-door fits no node group (model: nodeSelector "
        "{'gemma-graviton.dev/pool': 'door'} not among its labels; system: nodeSelector "
        "{'gemma-graviton.dev/pool': 'door'} not among its labels)"
    ]


def test_quantities_read_as_kubernetes_writes_them() -> None:
    assert semantics.quantity("26Gi") == 26 * 2**30
    assert semantics.quantity("30m") == 0.03
    assert semantics.quantity("1G") == 10**9
    with pytest.raises(ValueError, match="not a quantity"):
        semantics.quantity("1 GiB")


# -- the program's own pods ---------------------------------------------------------------------


def test_the_metrics_collector_the_program_makes_is_checked_too() -> None:
    objects, stack_world = _stack("prod", {})
    made = copy.deepcopy(list(stack_world.created))
    (collector,) = [o for o in made if o["kind"] == "Deployment"]
    name = collector["metadata"]["name"]
    without = [o for o in made if o["kind"] != "ServiceAccount"]
    # Moved to the model pool, it no longer tolerates what it runs on.
    collector["spec"]["template"]["spec"]["nodeSelector"] = {"gemma-graviton.dev/pool": "model"}
    broken = World(stack_world.node_groups, without, stack_world.undeclared)
    assert semantics.check(objects, broken) == [
        f"Deployment/{name} serviceAccountName: ServiceAccount {name} is not created",
        f"Deployment/{name} fits no node group (model: taint gemma-graviton.dev/pool=model:"
        "NoSchedule not tolerated; system: nodeSelector {'gemma-graviton.dev/pool': 'model'} "
        "not among its labels)",
    ]
    cfg = load_stack("prod", {"monitoring": False})
    assert not [o for o in world(cfg, plan(cfg, "prod")).created if o["kind"] == "Deployment"]


# -- --render ----------------------------------------------------------------------------------


def test_render_refuses_a_stack_whose_objects_would_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from infra.adapters import cli
    from infra.adapters import semantics as stack_semantics

    assert cli.main(["--stack", "dev", "--brief", "--render", str(tmp_path / "ok")]) == 0
    fault = "Service/gemma selector {} matches no pod"
    monkeypatch.setattr(stack_semantics, "findings", lambda cfg, p: [fault])
    capsys.readouterr()
    assert cli.main(["--stack", "dev", "--brief", "--render", str(tmp_path / "bad")]) == 2
    assert capsys.readouterr().err == f"error: --render: {fault}\n"


# -- PodDisruptionBudgets ----------------------------------------------------------------------


def test_a_budget_selecting_nothing_or_allowing_no_eviction_is_named_a_percentage_not() -> None:
    objects, _ = _stack("prod", {})
    budget = _one(objects, "PodDisruptionBudget", "gemma-queue-floor")
    budget["spec"]["minAvailable"] = 2
    assert semantics.stuck_budgets(objects) == [
        "PodDisruptionBudget/gemma-queue-floor minAvailable 2 of the 2 pod(s) it selects allows "
        "no eviction: a drain of their nodes never ends; run more replicas or lower it"
    ]
    budget["spec"]["minAvailable"] = 1
    budget["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] = "queue-flor"
    assert semantics.stuck_budgets(objects) == [
        "PodDisruptionBudget/gemma-queue-floor selector {'matchLabels': "
        "{'app.kubernetes.io/name': 'gemma', 'app.kubernetes.io/component': 'queue-flor'}} "
        "matches no pod"
    ]
    # eviction.go `getPodDisruptionBudgets`: "a PDB with a nil or empty selector ... should
    # match nothing, not everything". A percentage rounds against the pods the controller finds
    # (disruption.go `getExpectedScale`), which this rule does not model.
    budget["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] = "queue-floor"
    budget["spec"]["minAvailable"] = "100%"
    assert semantics.stuck_budgets(objects) == []
    budget["spec"]["selector"] = {}
    assert semantics.stuck_budgets(objects) == [
        "PodDisruptionBudget/gemma-queue-floor selector {} matches no pod"
    ]


def test_a_pod_under_two_budgets_is_named() -> None:
    objects, stack_world = _stack("prod", {})
    second = copy.deepcopy(_one(objects, "PodDisruptionBudget", "gemma-queue-floor"))
    second["metadata"]["name"] = "gemma-queue-floor-2"
    objects.append(second)
    assert semantics.stuck_budgets(objects) == [
        "Deployment/gemma-queue-floor is selected by 2 PodDisruptionBudgets "
        "(PodDisruptionBudget/gemma-queue-floor, PodDisruptionBudget/gemma-queue-floor-2): the "
        "eviction API refuses every eviction of it"
    ]
    assert semantics.check(objects, stack_world) == semantics.stuck_budgets(objects)


def test_a_budget_over_a_leader_worker_set_is_not_counted_by_replicas() -> None:
    # The LWS controller's pods come from StatefulSets it makes, not from a rendered replica
    # count: the minAvailable rule counts only what a Deployment or StatefulSet states.
    objects, _ = _stack("prod", {})
    budget = copy.deepcopy(_one(objects, "PodDisruptionBudget", "gemma-queue-floor"))
    budget["metadata"]["name"] = "gemma-groups-min"
    budget["spec"] = {
        "minAvailable": 100,
        "selector": {"matchLabels": {"leaderworkerset.sigs.k8s.io/name": "gemma-vllm"}},
    }
    objects = [o for o in objects if o["kind"] != "PodDisruptionBudget"] + [budget]
    assert semantics.stuck_budgets(objects) == []
