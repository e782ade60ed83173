"""The model pods stay what the plan sizes: exactly its containers, all Guaranteed, and nothing
the CloudWatch add-on's operator would inject.

An injected container (Application Signals' init containers request 50m and limit 500m) makes
the pod Burstable, and the static CPU manager then gives vLLM no exclusive cores; PYTHONPATH in
vllm, the first container, puts foreign packages ahead of vLLM's own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.adapters.render import render_stack
from infra.plan import pods
from infra.plan.stackfile import load_stack, stack_names
from tests import builders
from tests.fakes.cloudwatch_operator import annotated_languages
from tests.fakes.pulumi_mocks import by_type, named, one
from tests.program.harness import shared_run

LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
SERVICE = "kubernetes:core/v1:Service"
ADDON = "aws:eks/addon:Addon"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"


def _templates(lws: dict[str, Any]) -> dict[str, dict[str, Any]]:
    template = lws["spec"]["leaderWorkerTemplate"]
    found = {"leader": template["leaderTemplate"]}
    if "workerTemplate" in template:
        found["worker"] = template["workerTemplate"]
    return found


def _assert_as_planned(
    lws: dict[str, Any], weight_prefetch: bool, where: str, door: bool = False
) -> None:
    planned = pods.model_pod_containers(weight_prefetch, door)
    for role, template in _templates(lws).items():
        spec = template["spec"]
        init = tuple(c["name"] for c in spec.get("initContainers", []))
        main = tuple(c["name"] for c in spec["containers"])
        assert (init, main) == (planned[role].init, planned[role].containers), (where, role)
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            resources = container["resources"]
            # Guaranteed: every container, init containers included, requests == limits for
            # both CPU and memory (kubernetes pkg/apis/core/v1/helper/qos GetPodQOS).
            assert set(resources["limits"]) == {"cpu", "memory"}, (where, container["name"])
            assert resources["requests"] == resources["limits"], (where, container["name"])


@pytest.mark.parametrize("prefetch", [True, False])
@pytest.mark.parametrize("stack", stack_names())
def test_the_rendered_pods_have_exactly_the_planned_containers(
    stack: str, prefetch: bool, tmp_path: Path
) -> None:
    cfg, result = builders.planned(stack, {"weightPrefetch": prefetch})
    render_stack(cfg, result, tmp_path)
    documents = [
        doc
        for path in sorted(tmp_path.rglob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc.get("kind") == "LeaderWorkerSet"
    ]
    assert len(documents) == 1, [str(p) for p in tmp_path.rglob("*.yaml")]
    no_gatekeeper = cfg.elastic or not cfg.gatekeeper
    _assert_as_planned(documents[0], result.weight_prefetch, f"render of {stack}", no_gatekeeper)


@pytest.mark.parametrize("overrides", [{}, {"weightPrefetch": False, "modelCache": "volume"}])
@pytest.mark.parametrize("stack", stack_names())
def test_the_deployed_pods_have_exactly_the_planned_containers_and_no_instrumentation(
    stack: str, overrides: dict[str, Any]
) -> None:
    mocks, exports = shared_run(stack, overrides)
    lws = one(mocks.records, LWS)
    prefetch = overrides.get("weightPrefetch", True)
    cfg = load_stack(stack, overrides)
    door = cfg.elastic or not cfg.gatekeeper
    _assert_as_planned(lws.inputs, prefetch, lws.urn, door)

    agent = named(mocks.records, ADDON, "logs-addon")
    assert agent.inputs["addonName"] == "amazon-cloudwatch-observability", agent.urn
    configuration = json.loads(agent.inputs["configurationValues"])
    assert configuration["containerLogs"] == {"enabled": True}, agent.urn
    auto = configuration["manager"]["applicationSignals"]["autoMonitor"]
    assert auto["monitorAllServices"] is False, agent.urn

    # The Services of the model's namespace: the leaders-only front door and the headless one
    # LWS makes for every pod of the group (selector: the LWS name label).
    namespace = lws.inputs["metadata"]["namespace"]
    name = lws.inputs["metadata"]["name"]
    selectors = [
        s.inputs["spec"].get("selector") or {}
        for s in by_type(mocks.records, SERVICE)
        if s.inputs["metadata"].get("namespace") == namespace
    ]
    selectors.append({LWS_NAME: name})
    region = exports["region"]
    for role, template in _templates(lws.inputs).items():
        # The StatefulSets LWS makes carry the template's labels plus its own.
        labels = {**template["metadata"]["labels"], LWS_NAME: name}
        if role == "leader":
            labels["leaderworkerset.sigs.k8s.io/worker-index"] = "0"
        workload = {
            "namespace": namespace,
            "kind": "statefulsets",
            "name": name,
            "template_labels": labels,
            "service_selectors": selectors,
        }
        assert annotated_languages(configuration, region, **workload) == set(), (role, lws.urn)
        # Without the configuration (the add-on as EKS ships it) the operator would instrument
        # this pod: the test above would pass for the wrong reason if this did not hold.
        assert annotated_languages(None, region, **workload), (role, lws.urn)
