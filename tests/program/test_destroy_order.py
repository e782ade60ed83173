"""`pulumi destroy` leaves nothing billable: read from the dependency graph the program
registers. Pulumi deletes a resource only after everything that depends on it (directly or
through others) is gone, so "A goes before B" is "A depends on B, transitively".

The pairs that matter:
- the model group before its claims, each claim before its PersistentVolume, each
  PersistentVolume before its EBS volume, each EBS volume before the EBS CSI add-on (which
  detaches it; terraform-provider-aws internal/service/ec2/ebs_volume.go retries DeleteVolume
  while the volume is in use) and before the storage class;
- every add-on (CoreDNS too) and the Service (whose NLB the cloud controller removes) before the
  node group, and the node group before the EKS cluster and its subnets;
- the CloudWatch add-on (whose agent would recreate them without retention) before its log
  groups.
"""

from __future__ import annotations

import pytest

from infra.plan.stackfile import stack_names
from tests.fakes.pulumi_mocks import Recorded, RecordingMocks, by_type, named, one
from tests.program.harness import MODEL_NODES, MODEL_SERVICE, groups, shared_run

LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
PV = "kubernetes:core/v1:PersistentVolume"
VOLUME = "aws:ebs/volume:Volume"
ADDON = "aws:eks/addon:Addon"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
EKS_CLUSTER = "eks:index:Cluster"
SUBNET = "aws:ec2/subnet:Subnet"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"


def _closure(mocks: RecordingMocks) -> dict[str, set[str]]:
    """URN -> every URN it depends on, directly or through others."""
    direct = mocks.monitor.dependencies
    memo: dict[str, set[str]] = {}

    def reach(urn: str, seen: frozenset[str]) -> set[str]:
        if urn in memo:
            return memo[urn]
        found: set[str] = set()
        for dep in direct.get(urn, []):
            if dep not in seen:
                found |= {dep, *reach(dep, seen | {dep})}
        memo[urn] = found
        return found

    return {urn: reach(urn, frozenset({urn})) for urn in direct}


def _goes_before(graph: dict[str, set[str]], first: Recorded, then: Recorded) -> None:
    assert then.urn in graph[first.urn], f"destroy must delete {first.urn} before {then.urn}"


def _addon(mocks: RecordingMocks, name: str) -> Recorded:
    (found,) = [a for a in by_type(mocks.records, ADDON) if a.inputs["addonName"] == name]
    return found


@pytest.mark.parametrize("stack", stack_names())
def test_destroy_deletes_in_an_order_that_leaves_nothing_billable(stack: str) -> None:
    mocks, exports = shared_run(
        stack, {"modelCache": "volume", "monitoring": True, **groups(stack, 2)}
    )
    graph = _closure(mocks)
    lws, cluster = (one(mocks.records, t) for t in (LWS, EKS_CLUSTER))
    nodes = named(mocks.records, *MODEL_NODES)
    csi, agent = (
        _addon(mocks, "aws-ebs-csi-driver"),
        _addon(mocks, "amazon-cloudwatch-observability"),
    )
    storage_class = one(mocks.records, STORAGE_CLASS)
    claims = by_type(mocks.records, PVC)
    volumes = {v.resource_id: v for v in by_type(mocks.records, VOLUME)}
    pvs = {p.inputs["metadata"]["name"]: p for p in by_type(mocks.records, PV)}
    # One program-made volume per rank of every group, each behind its own claim.
    size = int(lws.inputs["spec"]["leaderWorkerTemplate"]["size"])
    assert len(claims) == len(volumes) == len(pvs) == 2 * size + int(exports["rolloutSurgeNodes"])
    for claim in claims:
        pv = pvs[claim.inputs["spec"]["volumeName"]]
        volume = volumes[pv.inputs["spec"]["csi"]["volumeHandle"]]
        assert pv.inputs["spec"]["claimRef"] == {
            "namespace": claim.inputs["metadata"]["namespace"],
            "name": claim.inputs["metadata"]["name"],
        }, pv.urn
        # Retain: the driver never deletes the volume itself; Pulumi does, in order.
        assert pv.inputs["spec"]["persistentVolumeReclaimPolicy"] == "Retain", pv.urn
        for first, then in ((lws, claim), (claim, pv), (pv, volume), (volume, csi)):
            _goes_before(graph, first, then)
        _goes_before(graph, claim, storage_class)
        assert volume.inputs["encrypted"] is True and volume.inputs["type"] == "gp3", volume.urn
    for addon in by_type(mocks.records, ADDON):
        _goes_before(graph, addon, nodes)
    _goes_before(graph, named(mocks.records, *MODEL_SERVICE), nodes)
    _goes_before(graph, nodes, cluster)
    subnets = {s.resource_id: s for s in by_type(mocks.records, SUBNET)}
    for subnet_id in cluster.inputs["subnetIds"]:
        _goes_before(graph, cluster, subnets[subnet_id])
    for subnet_id in nodes.inputs["subnetIds"]:
        _goes_before(graph, nodes, subnets[subnet_id])
    log_groups = {g.inputs["name"]: g for g in by_type(mocks.records, LOG_GROUP)}
    name = cluster.inputs["name"]
    for kind in ("application", "dataplane", "host", "performance"):
        _goes_before(graph, agent, log_groups[f"/aws/containerinsights/{name}/{kind}"])
    # EKS writes the control plane's logs to a group named after the cluster; made first, it
    # has a retention and goes with the stack.
    _goes_before(graph, cluster, log_groups[f"/aws/eks/{name}/cluster"])
