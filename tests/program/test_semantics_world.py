"""What the semantics check assumes the program creates beside the rendered objects
(`infra.adapters.semantics.world`) is what the program creates under the recording mocks: the two
Secrets with their keys, one PersistentVolume per rank's claim with its class, size, access modes
and zone, the node groups with their labels, taints and instance types, and the metrics
collector."""

from __future__ import annotations

from typing import Any

import pytest

from infra.adapters.semantics import world
from infra.plan.stackfile import load_stack, stack_names
from tests import builders
from tests.fakes.pulumi_mocks import RecordingMocks, by_type, named
from tests.program.harness import OWN_VALUES, shared_run, stacks_with

SECRET = "kubernetes:core/v1:Secret"
PV = "kubernetes:core/v1:PersistentVolume"
NODE_GROUP = "eks:index:ManagedNodeGroup"
ZONE = "topology.kubernetes.io/zone"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
#: The check's name of each node group, and the program's resource.
GROUPS = {"model": "eks-nodes", "system": "eks-system-nodes"}
EFFECTS = {"NoSchedule": "NO_SCHEDULE"}


def _world(stack: str, sets: dict[str, Any]) -> tuple[RecordingMocks, dict[str, Any], Any]:
    """The program's run on `stack` with `sets`, its exports and the check's world of it."""
    mocks, exports = shared_run(stack, sets)
    cfg, planned = builders.planned(stack, {**OWN_VALUES[stack], **sets})
    assumed = world(cfg, planned)
    volumes = [o for o in assumed.created if o["kind"] == "PersistentVolume"]
    assert bool(volumes) == (planned.model_cache == "volume")
    return mocks, exports, assumed


VARIANTS = [(s, {}) for s in stack_names()] + [("dev", {"weights": "int8"})]


@pytest.mark.parametrize(("stack", "sets"), VARIANTS)
def test_the_checks_secrets_are_the_programs(stack: str, sets: dict[str, Any]) -> None:
    mocks, _, expected = _world(stack, sets)
    made = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): set(
            r.inputs["stringData"]
        )
        for r in by_type(mocks.records, SECRET)
    }
    assert len(made) == 2
    assumed = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): set(o["stringData"])
        for o in expected.created
        if o["kind"] == "Secret"
    }
    assert made == assumed


@pytest.mark.parametrize(("stack", "sets"), VARIANTS)
def test_the_checks_volumes_are_the_programs(stack: str, sets: dict[str, Any]) -> None:
    mocks, exports, expected = _world(stack, sets)

    def shape(spec: dict[str, Any]) -> dict[str, Any]:
        return {k: spec[k] for k in ("claimRef", "capacity", "storageClassName", "accessModes")}

    made = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in by_type(mocks.records, PV)}
    assumed = {
        o["metadata"]["name"]: o["spec"]
        for o in expected.created
        if o["kind"] == "PersistentVolume"
    }
    assert {k: shape(v) for k, v in made.items()} == {k: shape(v) for k, v in assumed.items()}
    zone = exports["availabilityZone"]
    for name, spec in made.items():
        (term,) = spec["nodeAffinity"]["required"]["nodeSelectorTerms"]
        assert term["matchExpressions"] == [{"key": ZONE, "operator": "In", "values": [zone]}], name


@pytest.mark.parametrize(("stack", "sets"), VARIANTS)
def test_the_checks_node_groups_are_the_programs(stack: str, sets: dict[str, Any]) -> None:
    mocks, _, expected = _world(stack, sets)
    cfg = load_stack(stack, {**OWN_VALUES[stack], **sets})
    assert {g.name for g in expected.node_groups} == (
        {"model", "system"} if cfg.elastic else {"model"}
    )
    for group in expected.node_groups:
        made = named(mocks.records, NODE_GROUP, GROUPS[group.name])
        # The zone and the instance type are the cloud node controller's labels, not the group's.
        labels = {k: v for k, v in group.labels.items() if k not in (ZONE, INSTANCE_TYPE)}
        assert made.inputs["labels"] == labels, made.urn
        assert made.inputs["instanceTypes"] == [group.instance_type], made.urn
        taints = [{**t, "effect": EFFECTS[t["effect"]]} for t in group.taints]
        assert made.inputs.get("taints", []) == taints, made.urn


@pytest.mark.parametrize("stack", stacks_with("monitoring"))
def test_the_checks_collector_is_the_programs(stack: str) -> None:
    mocks, _, expected = _world(stack, {})
    kinds = {"ServiceAccount": "core/v1", "ConfigMap": "core/v1", "Deployment": "apps/v1"}
    for kind, api in kinds.items():
        (assumed,) = [o for o in expected.created if o["kind"] == kind]
        made = [
            r
            for r in by_type(mocks.records, f"kubernetes:{api}:{kind}")
            if r.inputs["metadata"]["name"] == assumed["metadata"]["name"]
        ]
        assert len(made) == 1, (kind, assumed["metadata"]["name"])
        assert made[0].inputs["metadata"]["namespace"] == assumed["metadata"]["namespace"]
        if kind == "Deployment":
            pod, want = made[0].inputs["spec"]["template"]["spec"], assumed["spec"]["template"]
            assert pod["nodeSelector"] == want["spec"]["nodeSelector"], made[0].urn
            assert pod["serviceAccountName"] == want["spec"]["serviceAccountName"], made[0].urn
            assert pod["volumes"] == want["spec"]["volumes"], made[0].urn
