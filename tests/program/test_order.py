"""The order Pulumi creates and destroys things in, read from the dependency graph the program
registers (the mock monitor records each registration's dependencies, as the engine gets them).

Create: nothing in the cluster starts its await before the nodes exist; the LeaderWorkerSet waits
for the webhook gate. Destroy runs the same graph backwards: the LeaderWorkerSet, its volume
claims and the Service (with its NLB) go before the storage class and the add-ons, and all of
them before the node group, the cluster and the VPC.
"""

from __future__ import annotations

import pytest

from infra.plan.stackfile import stack_names
from tests.fakes.pulumi_mocks import Recorded, RecordingMocks, by_type, named, one
from tests.program.harness import (
    MODEL_NODES,
    MODEL_SERVICE,
    SYSTEM_NODES,
    groups,
    shared_run,
)

NODE_GROUP = "eks:index:ManagedNodeGroup"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
JOB = "kubernetes:batch/v1:Job"
CHART = "kubernetes:helm.sh/v4:Chart"
ADDON = "aws:eks/addon:Addon"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"


def _depends_on(mocks: RecordingMocks, record: Recorded, target: Recorded) -> None:
    assert target.urn in mocks.monitor.dependencies[record.urn], (record.urn, target.urn)


@pytest.mark.parametrize("stack", stack_names())
def test_everything_in_the_cluster_waits_for_the_node_group(stack: str) -> None:
    mocks, _ = shared_run(stack, {"modelCache": "volume"})
    model = named(mocks.records, *MODEL_NODES)
    # Elastic: controllers and add-ons wait for the always-on system nodes.
    elastic = by_type(mocks.records, NODE_GROUP) != [model]
    nodes = named(mocks.records, *SYSTEM_NODES) if elastic else model
    for record in (*by_type(mocks.records, CHART), one(mocks.records, JOB)):
        _depends_on(mocks, record, nodes)
    for record in (one(mocks.records, LWS), named(mocks.records, *MODEL_SERVICE)):
        _depends_on(mocks, record, model)
    addons = by_type(mocks.records, ADDON)
    assert {a.inputs["addonName"] for a in addons} == {
        "amazon-cloudwatch-observability",
        "aws-ebs-csi-driver",
        "coredns",
        "eks-pod-identity-agent",
    }
    for addon in addons:
        _depends_on(mocks, addon, nodes)
    csi = next(a for a in addons if a.inputs["addonName"] == "aws-ebs-csi-driver")
    _depends_on(mocks, one(mocks.records, STORAGE_CLASS), csi)


def test_the_leaderworkerset_waits_for_the_webhook_gate() -> None:
    mocks, _ = shared_run("dev")
    lws, job, chart = (one(mocks.records, t) for t in (LWS, JOB, CHART))
    _depends_on(mocks, lws, job)
    _depends_on(mocks, job, chart)
    assert job.inputs["metadata"]["namespace"] == "lws-system", job.urn
    (container,) = job.inputs["spec"]["template"]["spec"]["containers"]
    assert container["command"][:3] == ["kubectl", "create", "--dry-run=server"], job.urn
    assert job.inputs["spec"]["activeDeadlineSeconds"] == 600, job.urn
    timeout = int(job.inputs["metadata"]["annotations"]["pulumi.com/timeoutSeconds"])
    assert timeout > job.inputs["spec"]["activeDeadlineSeconds"], job.urn


PVC = "kubernetes:core/v1:PersistentVolumeClaim"


@pytest.mark.parametrize("stack", stack_names())
def test_weight_volumes_survive_a_group_recreation_and_go_before_the_driver(stack: str) -> None:
    # The run test_destroy_order.py reads (monitoring on leaves the volumes as they are).
    mocks, exports = shared_run(
        stack, {"modelCache": "volume", "monitoring": True, **groups(stack, 2)}
    )
    lws = one(mocks.records, LWS)
    template = lws.inputs["spec"]["leaderWorkerTemplate"]
    size = int(template["size"])
    # Two groups, and a rollout's surge groups where the node group can grow for them.
    replicas = 2 + int(exports["rolloutSurgeNodes"]) // size
    # The StatefulSets keep their claims when LWS deletes them on a group recreation...
    assert template["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }
    # ...and every rank of every group has one, made by Pulumi under the name the StatefulSet
    # looks for, so Pulumi deletes them on destroy.
    claims = by_type(mocks.records, PVC)
    names = {c.inputs["metadata"]["name"] for c in claims}
    lws_name = lws.inputs["metadata"]["name"]
    expected = set()
    for group in range(replicas):
        expected.add(f"models-{lws_name}-{group}")
        expected |= {f"models-{lws_name}-{group}-{rank}" for rank in range(1, size)}
    assert names == expected
    sc = one(mocks.records, STORAGE_CLASS)
    nodes = named(mocks.records, *MODEL_NODES)
    for claim in claims:
        assert claim.inputs["spec"]["storageClassName"] == sc.inputs["metadata"]["name"]
        _depends_on(mocks, lws, claim)
        _depends_on(mocks, claim, nodes)
        assert set(mocks.monitor.dependencies[claim.urn]) & {
            r.urn for r in mocks.records if r.parent and "ModelVolumes" in r.parent
        }, claim.urn
