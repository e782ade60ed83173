"""Every probe and lifecycle hook of every rendered pod names a port its own container declares.

The kubelet resolves a named port among the probed container's own `ports` only (kubernetes
v1.35 `pkg/probe/util.go` `findPortByName`; lifecycle hooks the same way,
`pkg/kubelet/lifecycle/handlers.go` `resolvePort`), and throws away a probe that errors
(`pkg/kubelet/prober/worker.go`: "Prober error, throw away the result"): a startup probe on a port
its container does not declare never succeeds, and the pod never starts or turns Ready.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from components.manifests.spec import MODEL_TAINT
from infra.plan.render import rendered_objects
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack

HANDLERS = ("startupProbe", "readinessProbe", "livenessProbe")
VARIANTS = [("dev", {}), ("prod", {}), ("dev", {"weights": "int8"}), ("prod", {"weights": "int8"})]


def _templates(obj: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, pod spec) of every pod template an object carries."""
    name = f"{obj['kind']}/{obj['metadata']['name']}"
    spec = obj.get("spec", {})
    if obj["kind"] == "LeaderWorkerSet":
        group = spec["leaderWorkerTemplate"]
        for part in ("leaderTemplate", "workerTemplate"):
            if part in group:
                yield f"{name} {part}", group[part]["spec"]
    elif obj["kind"] == "Pod":
        yield name, spec
    elif obj["kind"] == "CronJob":
        yield name, spec["jobTemplate"]["spec"]["template"]["spec"]
    elif "template" in spec:
        yield name, spec["template"]["spec"]


def _named_ports(handler: dict[str, Any]) -> Iterator[str]:
    for kind in ("httpGet", "tcpSocket", "grpc"):
        port = handler.get(kind, {}).get("port")
        if isinstance(port, str):
            yield port


def unresolved_ports(objects: list[dict[str, Any]]) -> list[str]:
    """Every probe or hook whose named port its own container does not declare."""
    found = []
    for obj in objects:
        for where, pod in _templates(obj):
            for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
                declared = {p.get("name") for p in container.get("ports", [])}
                handlers = [(h, container[h]) for h in HANDLERS if h in container]
                lifecycle = container.get("lifecycle", {})
                handlers += [(h, lifecycle[h]) for h in ("postStart", "preStop") if h in lifecycle]
                for kind, handler in handlers:
                    found += [
                        f"{where} {container['name']} {kind} port {port!r}"
                        for port in _named_ports(handler)
                        if port not in declared
                    ]
    return found


def _objects(stack: str, sets: dict[str, Any]) -> list[dict[str, Any]]:
    cfg = load_stack(stack, sets)
    return rendered_objects(cfg, plan(cfg, stack))


@pytest.mark.parametrize(("stack", "sets"), VARIANTS)
def test_every_named_probe_port_is_its_own_containers(stack: str, sets: dict[str, Any]) -> None:
    assert unresolved_ports(_objects(stack, sets)) == []


def test_the_check_catches_a_probe_on_another_containers_port() -> None:
    objects = copy.deepcopy(_objects("dev", {}))
    (group,) = [o for o in objects if o["kind"] == "LeaderWorkerSet"]
    leader = group["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    (engine,) = [c for c in leader["containers"] if c["name"] == "vllm"]
    # The fault the dev render had: the engine's probes on the gatekeeper's port name.
    engine["startupProbe"]["httpGet"]["port"] = "gatekeeper"
    assert unresolved_ports(objects) == [
        "LeaderWorkerSet/gemma-vllm leaderTemplate vllm startupProbe port 'gatekeeper'"
    ]


def test_the_dev_engine_probes_the_gatekeepers_probe_port_by_number() -> None:
    (group,) = [o for o in _objects("dev", {}) if o["kind"] == "LeaderWorkerSet"]
    leader = group["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    (gate,) = [c for c in leader["containers"] if c["name"] == "gatekeeper"]
    (engine,) = [c for c in leader["containers"] if c["name"] == "vllm"]
    (probes,) = [p["containerPort"] for p in gate["ports"] if p["name"] == "probe"]
    assert engine["startupProbe"]["httpGet"]["port"] == probes
    assert engine["readinessProbe"]["httpGet"]["port"] == probes


def untolerated(
    objects: list[dict[str, Any]], taints: dict[str, list[dict[str, str]]]
) -> list[str]:
    """Every pod template whose nodeSelector picks a tainted node pool it does not tolerate.

    `taints` maps a pool label value to its NoSchedule taints. The scheduler's TaintToleration
    filter (kubernetes v1.35 `pkg/scheduler/framework/plugins/tainttoleration`) refuses such a
    node, and the Cluster Autoscaler simulates the same filter on its template node.
    """
    found = []
    for obj in objects:
        for where, pod in _templates(obj):
            pool = pod.get("nodeSelector", {}).get(MODEL_TAINT["key"])
            tolerated = {
                (t.get("key"), t.get("value"), t.get("effect")) for t in pod.get("tolerations", [])
            }
            for taint in taints.get(pool, []):
                if (taint["key"], taint["value"], taint["effect"]) not in tolerated:
                    found.append(f"{where} on pool {pool} does not tolerate {taint['key']}")
    return found


def _model_taints(stack: str, sets: dict[str, Any]) -> dict[str, list[dict[str, str]]]:
    # The model node group carries MODEL_TAINT on elastic stacks only (components/cluster.py).
    cfg = load_stack(stack, sets)
    return {MODEL_TAINT["value"]: [MODEL_TAINT]} if cfg.elastic else {}


@pytest.mark.parametrize(("stack", "sets"), VARIANTS)
def test_every_pod_tolerates_its_pools_taints(stack: str, sets: dict[str, Any]) -> None:
    objects = _objects(stack, sets)
    assert untolerated(objects, _model_taints(stack, sets)) == []


def test_the_quantize_job_of_an_elastic_stack_tolerates_the_model_taint() -> None:
    objects = _objects("prod", {"weights": "int8"})
    jobs = [o for o in objects if o["kind"] == "Job" and "quantize" in o["metadata"]["name"]]
    assert jobs, "prod with weights int8 renders its quantize Job"
    for job in jobs:
        # The fault the Job had: no toleration, so the check names it.
        del job["spec"]["template"]["spec"]["tolerations"]
    assert untolerated(objects, _model_taints("prod", {})) == [
        f"Job/{job['metadata']['name']} on pool model does not tolerate {MODEL_TAINT['key']}"
        for job in jobs
    ]
