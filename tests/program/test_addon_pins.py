"""What an upgrade and an unchanged `pulumi up` do to the nodes and the add-ons.

Encodes, read 2026-12-01 (pulumi/pulumi-eks master at 7bf0c1b, the source of pulumi-eks 4.x):
- nodejs/eks/nodes/nodegroup.ts: a managed node group gets the cluster's version only when it
  has no launch template; with ours it would keep its first version through an upgrade;
- nodejs/eks/cluster/cluster.ts: vpc-cni and kube-proxy are installed with the cluster at
  `getAddonVersion(mostRecent: true)` unless a version is given, and coredns only with a default
  node group, Fargate or auto mode (we skip the default node group).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from infra.plan import addons, checked
from infra.plan.config import ConfigError
from infra.plan.stackfile import load_stack, stack_names
from tests.fakes.pulumi_mocks import by_type, named, one
from tests.program.harness import MODEL_NODES, shared_run

NODE_GROUP = "eks:index:ManagedNodeGroup"
EKS_CLUSTER = "eks:index:Cluster"
ADDON = "aws:eks/addon:Addon"


@pytest.mark.parametrize(
    "overrides",
    [{"monitoring": True, "modelCache": "volume"}, {"kubernetesVersion": "1.34"}],
    ids=["as-written", "set-1.34"],
)
@pytest.mark.parametrize("stack", stack_names())
def test_nodes_and_every_addon_follow_kubernetes_version(
    stack: str, overrides: dict[str, Any]
) -> None:
    mocks, _ = shared_run(stack, overrides)
    version = load_stack(stack, overrides).kubernetes_version
    pins = addons.pinned(version)
    assert pins is not None, version
    cluster = one(mocks.records, EKS_CLUSTER)
    nodes = named(mocks.records, *MODEL_NODES)
    system = by_type(mocks.records, NODE_GROUP)
    # Every node group, the system one of an elastic stack too, upgrades with the control plane.
    assert {n.inputs["version"] for n in system} == {version}
    assert cluster.inputs["version"] == version, cluster.urn
    # pulumi-eks' own add-ons at the catalogue's versions, never "most recent".
    assert cluster.inputs["vpcCniOptions"]["addonVersion"] == pins["vpc-cni"], cluster.urn
    assert cluster.inputs["kubeProxyAddonOptions"]["version"] == pins["kube-proxy"], cluster.urn
    assert cluster.inputs["corednsAddonOptions"]["enabled"] is False, cluster.urn
    # The program's add-ons: each pinned, coredns among them, nothing looked up at deploy.
    installed = {a.inputs["addonName"]: a for a in by_type(mocks.records, ADDON)}
    assert "coredns" in installed
    for name, addon in installed.items():
        assert addon.inputs["addonVersion"] == pins[name], addon.urn
    assert not [c for c in mocks.calls if c.token == "aws:eks/getAddonVersion:getAddonVersion"]
    coredns = installed["coredns"]
    # CoreDNS pods need nodes: the add-on waits for the node group (and goes before it), the
    # always-on system group of an elastic stack, whose model nodes may be none.
    runs_on = system[-1] if len(system) > 1 else nodes
    assert runs_on.urn in mocks.monitor.dependencies[coredns.urn], coredns.urn


def test_every_supported_version_pins_every_addon() -> None:
    for version, row in addons.ADDON_VERSIONS.items():
        assert set(row) == set(addons.ADDONS), version
        for name, pin in row.items():
            assert pin.version.startswith("v") and "-eksbuild." in pin.version, (version, name)
            assert pin.source and pin.read, (version, name)


def test_a_version_without_pins_is_refused_in_one_line_and_the_fix_is_accepted() -> None:
    today = dt.date(2026, 12, 1)
    cfg = load_stack("dev", {"kubernetesVersion": "1.36"}, today)
    with pytest.raises(ConfigError) as error:
        checked.checked_plan(cfg, "dev", ["kubernetesVersion"], today)
    assert str(error.value) == (
        "`kubernetesVersion` 1.36 has no pinned EKS add-on versions (infra/plan/addons.py); use "
        "1.35, or add its row with the versions EKS lists for it"
    )
    fixed = load_stack("dev", {"kubernetesVersion": "1.35"}, today)
    assert checked.checked_plan(fixed, "dev", ["kubernetesVersion"], today).nodes == 2


@pytest.mark.parametrize("version", ["1.34", "1.35"])
def test_the_cni_and_ebs_pins_of_1_34_and_1_35_are_the_ones_public_1_35_clusters_list(
    version: str,
) -> None:
    # Read 2026-12-03: an EKS 1.33-1.35 upgrade guide's version table (from `aws eks
    # describe-addon-versions`) and an aws-cdk-lib aws-eks-v2 cluster's add-on map list
    # vpc-cni v1.22.2-eksbuild.1 and aws-ebs-csi-driver v1.61.1-eksbuild.1 for 1.34 and 1.35, with
    # this table's own kube-proxy builds (v1.34.6-eksbuild.13, v1.35.3-eksbuild.13). The pins
    # they replace: v1.20.1-eksbuild.3, in AWS's table up to 1.33 only; v1.44.0-eksbuild.1, with
    # no Kubernetes version read for it.
    pins = addons.pinned(version)
    assert pins is not None
    assert (pins["vpc-cni"], pins["aws-ebs-csi-driver"]) == (
        "v1.22.2-eksbuild.1",
        "v1.61.1-eksbuild.1",
    )
    assert (
        pins["kube-proxy"]
        == {"1.34": "v1.34.6-eksbuild.13", "1.35": "v1.35.3-eksbuild.13"}[version]
    )
    row = addons.ADDON_VERSIONS[version]
    for name in ("vpc-cni", "aws-ebs-csi-driver"):
        assert row[name].confirmed and row[name].read == dt.date(2026, 12, 3), name
        assert "2026-12-03" in row[name].source, name
    assert addons.unconfirmed(version) == []
    assert addons.warnings(version) == []
