"""Into a cluster the stack does not own (`existingCluster`): the program reads the cluster,
refuses one it cannot use before anything is created, and creates only the model's layer, which
`pulumi destroy` removes and nothing else."""

from __future__ import annotations

import json
import re
from typing import Any

import pulumi
import pytest

from components.manifests.pod_world import pods
from components.manifests.semantics import _tolerated
from components.manifests.spec import stack_taint
from infra.adapters.wiring import NODE_LABELS, NODE_POOL_LABEL
from tests.fakes.pulumi_mocks import (
    Recorded,
    RecordingMocks,
    by_type,
    is_secret,
    named,
    one,
    resolve,
)
from tests.program import harness
from tests.program.harness import (
    EXISTING_ADDONS,
    EXISTING_CLUSTER,
    LWS_CRD,
    bootstrap_roles,
    existing_cluster,
    lws_crd,
    run_into_existing,
)
from tests.program.test_destroy_order import _closure

pytestmark = pytest.mark.usefixtures("as_pulumi_host")

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ADDON = "aws:eks/addon:Addon"
ZONE_SUBNET = "subnet-0aaa1111bbbb2222c"
#: The add-on `modelCache: volume` needs the cluster to run.
_VOLUMES = {"aws-ebs-csi-driver": ""}


def created(mocks: RecordingMocks) -> list[Recorded]:
    """What `pulumi destroy` deletes: every registered resource but the providers and the
    project's own components, which hold nothing themselves (a remote component, the LWS
    chart, stands for the objects it made). Reads are never deleted."""
    return [
        r
        for r in mocks.records
        if not r.read and not r.type_.startswith(("pulumi:providers:", "gemma-graviton:"))
    ]


def _addon_names(mocks: RecordingMocks) -> set[str]:
    return {a.inputs["addonName"] for a in by_type(mocks.records, ADDON)}


def test_the_stack_creates_the_model_layer_and_no_network_or_cluster(
    mocks: RecordingMocks, exports: dict[str, Any]
) -> None:
    existing_cluster(mocks)
    run_into_existing(mocks)
    # No network, cluster or IAM entity, the cluster role least: DESTROYED and READ_ONLY list
    # exactly what it creates and reads (test_destroy_removes_exactly_what_the_stack_created).
    nodes = one(mocks.records, NODE_GROUP)
    assert nodes.inputs["clusterName"] == EXISTING_CLUSTER, nodes.urn
    assert nodes.inputs["subnetIds"] == [ZONE_SUBNET], nodes.urn
    assert nodes.inputs["instanceTypes"] == [exports["nodeInstanceType"]], nodes.urn
    assert nodes.inputs["labels"] == NODE_LABELS, nodes.urn
    assert nodes.inputs["version"] == "1.35" and nodes.inputs["amiType"].endswith("ARM_64_STANDARD")
    size = nodes.inputs["scalingConfig"]
    assert size["minSize"] == size["desiredSize"] == exports["nodeCount"], nodes.urn
    # LWS (the cluster runs none), the group and its load balancer.
    assert one(mocks.records, "kubernetes:helm.sh/v4:Chart").name == "lws-chart"
    one(mocks.records, "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")
    service = named(mocks.records, *harness.MODEL_SERVICE)
    assert service.inputs["spec"]["type"] == "LoadBalancer", service.urn
    # The add-ons the cluster runs are left alone.
    assert _addon_names(mocks) == set()
    assert resolve(exports["clusterName"]) == EXISTING_CLUSTER
    kubeconfig = resolve(exports["kubeconfig"])
    assert is_secret(exports["kubeconfig"]) and "5E1D0CA1F00DBA5E.gr7" in kubeconfig
    assert f'"--cluster-name", "{EXISTING_CLUSTER}"' in kubeconfig
    assert resolve(exports["endpoint"]).endswith("/v1")
    assert resolve(exports["lwsController"]) == "installed by the stack (lws-system)"


def test_a_cluster_that_runs_lws_gets_no_second_controller(
    mocks: RecordingMocks, exports: dict[str, Any]
) -> None:
    existing_cluster(mocks, lws=lws_crd())
    run_into_existing(mocks, {"lwsInstalled": True})
    types = {r.type_ for r in mocks.records}
    assert "kubernetes:helm.sh/v4:Chart" not in types
    assert "gemma-graviton:leaderworkerset:LwsController" not in types
    crd = one(mocks.records, LWS_CRD[0])
    assert crd.read and crd.resource_id == LWS_CRD[1]
    group = one(mocks.records, "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")
    assert crd.urn in mocks.monitor.dependencies[group.urn], group.urn
    assert resolve(exports["lwsController"]) == (
        "the cluster's (leaderworkersets.leaderworkerset.x-k8s.io, serving v1)"
    )


def test_the_lws_chart_keeps_its_crds_on_destroy(mocks: RecordingMocks) -> None:
    existing_cluster(mocks)
    run_into_existing(mocks)
    chart = one(mocks.records, "kubernetes:helm.sh/v4:Chart")

    def retained(type_: str) -> bool:
        args = pulumi.ResourceTransformArgs(True, type_, "x", {}, pulumi.ResourceOptions())
        results = [t(args) for t in chart.transforms]
        return any(r is not None and r.opts.retain_on_delete for r in results)

    assert retained("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"), chart.urn
    assert not retained("kubernetes:apps/v1:Deployment"), chart.urn


def _workloads(mocks: RecordingMocks) -> list[dict[str, Any]]:
    """Every Kubernetes object the program registered, as the API server would get it."""
    return [
        {"kind": r.type_.rsplit(":", 1)[-1], **r.inputs}
        for r in mocks.records
        if r.type_.startswith("kubernetes:") and not r.read and "metadata" in r.inputs
    ]


@pytest.mark.parametrize(
    ("overrides", "on_model_nodes"),
    [
        # Two-rank groups (bf16), the weights on the node disk.
        ({}, {"leaderTemplate", "workerTemplate", "Deployment/metrics-collector"}),
        # One-rank groups (int8) on volumes, their checkpoint made by the quantize Job.
        (
            {"weights": "int8", "modelCache": "volume"},
            {"leaderTemplate", "Job/gemma-quantize", "Deployment/metrics-collector"},
        ),
    ],
)
def test_only_the_pods_that_must_run_on_the_model_nodes_tolerate_their_taint(
    mocks: RecordingMocks, overrides: dict[str, Any], on_model_nodes: set[str]
) -> None:
    # The Pod Identity agent the stack creates too: every workload the program has.
    existing_cluster(mocks, addons={**EXISTING_ADDONS, **_VOLUMES, "eks-pod-identity-agent": None})
    run_into_existing(mocks, overrides)
    taint = stack_taint("dev")
    nodes = one(mocks.records, NODE_GROUP)
    assert nodes.inputs["taints"] == [
        {"key": "gemma-graviton.dev/stack", "value": "dev", "effect": "NO_SCHEDULE"}
    ], nodes.urn
    tolerating = set()
    for pod in pods(_workloads(mocks)):
        on_model = pod.spec.get("nodeSelector", {}).get(NODE_POOL_LABEL) == "model"
        assert _tolerated(pod.spec, taint) == on_model, (pod.where, on_model)
        if on_model:
            # The quantize Job's name carries its inputs' digest; the groups' templates one LWS.
            tolerating.add(re.sub(r"-[0-9a-f]{10}$", "", pod.where.split(" ")[-1]))
    assert tolerating == on_model_nodes


def _refused(mocks: RecordingMocks, overrides: dict[str, Any] | None = None, **kw: Any) -> str:
    with pytest.raises(Exception) as raised:
        run_into_existing(mocks, overrides, **kw)
    assert created(mocks) == [], [r.urn for r in created(mocks)]
    return str(raised.value)


def test_a_cluster_lws_without_a_field_the_groups_set_is_refused(mocks: RecordingMocks) -> None:
    """With nothing created, in an `up` too: CI's `pulumi/actions` runs `up --skip-preview`, so
    the node group and all else wait for the CRD's check (`_refused`)."""
    existing_cluster(mocks, lws=lws_crd(drop="startupPolicy"))
    assert (
        "`lwsInstalled` the cluster's CRD leaderworkersets.leaderworkerset.x-k8s.io has no "
        "spec.startupPolicy, which the groups set (the API server would drop them); upgrade the "
        "cluster's LeaderWorkerSet controller to v0.10.0 or later, or deploy into a cluster "
        "without one and set `lwsInstalled` to false"
    ) in _refused(mocks, {"lwsInstalled": True})


#: A cluster the stack cannot use, refused before anything is created: `existing_cluster`'s
#: arguments (None: no cluster), the stack's overrides and the refusal.
REFUSED = {
    "other-kubernetes-version": (
        {"version": "1.34"},
        None,
        "`kubernetesVersion` is 1.35, but `existingCluster` platform-shared runs 1.34; set "
        '`kubernetesVersion` to "1.34"',
    ),
    "unsupported-kubernetes-version": (
        {"version": "1.29"},
        None,
        "`existingCluster` platform-shared runs Kubernetes 1.29, which the plan does not "
        "support (1.32, 1.33, 1.34, 1.35); upgrade the cluster to 1.35, or deploy into another "
        "cluster",
    ),
    "cluster-without-access-entries": (
        {"authentication": "CONFIG_MAP"},
        None,
        "`existingCluster` platform-shared authenticates with the aws-auth ConfigMap only "
        "(CONFIG_MAP), which takes no access entry and no role with an IAM path such as the "
        "stack's node role; have its owner run `aws eks update-cluster-config --name "
        "platform-shared --access-config authenticationMode=API_AND_CONFIG_MAP`",
    ),
    "named-subnet-missing": (
        {},
        {"existingClusterSubnet": "subnet-0bad0bad0bad0bad0"},
        "`existingClusterSubnet` subnet-0bad0bad0bad0bad0 is not a subnet this account can see; "
        "use a subnet ID of the cluster's VPC, as `aws ec2 describe-subnets` prints it",
    ),
    "missing-cluster": (
        None,
        None,
        "`existingCluster` platform-shared is not an EKS cluster of us-west-2 that this account "
        "can see; check the name with `aws eks list-clusters --region us-west-2`",
    ),
    "subnet-outside-the-zone": (
        {},
        {"existingClusterSubnet": "subnet-0ddd3333eeee4444f"},
        "`existingClusterSubnet` subnet-0ddd3333eeee4444f is in us-west-2b (usw2-az1), not in "
        "the planned zone us-west-2a; choose a subnet in us-west-2a, or set `availabilityZone` "
        "to us-west-2b",
    ),
    "subnet-without-room": (
        {"free": 100},
        None,
        "`existingCluster` subnet-0aaa1111bbbb2222c has 100 free addresses, but 2 x m7g.2xlarge "
        "may take 120 (60 each, modelled); give a subnet with room in `existingClusterSubnet`, "
        "or free addresses in it",
    ),
    "no-vpc-cni": (
        {"addons": {"eks-pod-identity-agent": ""}},
        None,
        "`existingCluster` platform-shared runs no vpc-cni add-on, whose policy agent enforces "
        "the model's NetworkPolicy",
    ),
    "vpc-cni-without-network-policy": (
        {"addons": {**EXISTING_ADDONS, "vpc-cni": ""}},
        None,
        "`existingCluster` platform-shared's vpc-cni add-on runs without network policy, so the "
        "model's NetworkPolicy would be accepted and ignored; have its owner run `aws eks "
        "update-addon --cluster-name platform-shared --addon-name vpc-cni "
        """--configuration-values '{"enableNetworkPolicy":"true"}'`""",
    ),
    "volumes-without-the-ebs-csi-driver": (
        {},
        {"modelCache": "volume"},
        "`modelCache` is volume, but `existingCluster` platform-shared runs no aws-ebs-csi-driver "
        "add-on to provision the volumes, and the stack installs none in a cluster it does not "
        "own; have its owner install aws-ebs-csi-driver, or set `modelCache` to none",
    ),
    "monitoring-without-the-cloudwatch-add-on": (
        {"addons": {"vpc-cni": EXISTING_ADDONS["vpc-cni"]}},
        None,
        "`monitoring` counts answers in the logs platform-shared's amazon-cloudwatch-observability "
        "add-on ships, but it runs none, and the stack installs none in a cluster it does not "
        "own; have its owner install amazon-cloudwatch-observability, or set `monitoring` to "
        "false",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_cluster_the_stack_cannot_use_is_refused_before_anything_is_made(
    mocks: RecordingMocks, case: str
) -> None:
    cluster, overrides, message = REFUSED[case]
    if cluster is not None:
        existing_cluster(mocks, **cluster)
    assert message in _refused(mocks, overrides)


def test_a_subnet_ec2_no_longer_finds_is_passed_over_and_a_named_one_read_alone(
    mocks: RecordingMocks,
) -> None:
    # The cluster still lists a subnet since deleted: it takes no nodes, and is no refusal.
    existing_cluster(mocks)
    del mocks.subnets["subnet-0999888877776666a"]
    run_into_existing(mocks)
    assert one(mocks.records, NODE_GROUP).inputs["subnetIds"] == [ZONE_SUBNET]
    fresh = RecordingMocks()
    existing_cluster(fresh)
    run_into_existing(fresh, {"existingClusterSubnet": ZONE_SUBNET})
    read = [c.args["id"] for c in fresh.calls if c.token == "aws:ec2/getSubnet:getSubnet"]
    assert read == [ZONE_SUBNET]


def _nodes(*nodes: tuple[str, str, str, tuple[int, ...]]) -> dict[str, dict[str, Any]]:
    """Instances as DescribeInstances lists them, by ID: each (subnet, stack, state, addresses
    of each interface)."""
    return {
        f"i-{n}": {
            "subnetId": subnet,
            "state": state,
            "tags": {"project": "gemma-graviton", "stack": stack, "owner": "ml-platform"},
            "interfaces": {
                f"eni-{n}-{i}": [f"10.80.{i}.{a}" for a in range(count)]
                for i, count in enumerate(addresses)
            },
        }
        for n, (subnet, stack, state, addresses) in enumerate(nodes)
    }


def test_a_running_stack_is_not_refused_for_the_addresses_its_nodes_hold(
    mocks: RecordingMocks, caplog: pytest.LogCaptureFixture
) -> None:
    # 100 free, 120 needed: the stack's two nodes hold 20 of the 120 already. Another stack's
    # node, a stopped one, one in another subnet and one of another type (a new type is a new
    # node group, made before the old goes) hold none of the stack's; an interface deleted
    # between its listing and its read holds none.
    existing_cluster(mocks, free=100)
    mocks.instances = _nodes(
        (ZONE_SUBNET, "dev", "running", (6, 4)),
        (ZONE_SUBNET, "dev", "pending", (10,)),
        (ZONE_SUBNET, "prod", "running", (50,)),
        (ZONE_SUBNET, "dev", "stopped", (50,)),
        ("subnet-0ddd3333eeee4444f", "dev", "running", (50,)),
        (ZONE_SUBNET, "dev", "running", (50,)),
    )
    mocks.instances["i-5"]["instanceType"] = "c7g.4xlarge"
    mocks.instances["i-1"]["interfaces"]["eni-1-1"] = None
    mocks.instances["i-1"]["interfaces"]["eni-1-0"] = [f"10.80.9.{a}" for a in range(10)]
    run_into_existing(mocks)
    assert one(mocks.records, NODE_GROUP).inputs["subnetIds"] == [ZONE_SUBNET]
    # Room for the group, not for an update's two new nodes beside the running ones: said.
    assert (
        f"{ZONE_SUBNET} has 100 free addresses, but an update of the node group (a new launch "
        "template or Kubernetes version) launches up to 2 x m7g.2xlarge beside the running "
        "nodes, which may take 120 addresses (modelled, at most): free addresses in it before "
        "such an update"
    ) in caplog.text
    fresh = RecordingMocks()
    existing_cluster(fresh, free=100)
    fresh.instances = _nodes((ZONE_SUBNET, "dev", "running", (6, 3)))
    assert (
        f"`existingCluster` {ZONE_SUBNET} has 100 free addresses (and 9 its own nodes hold), "
        "but 2 x m7g.2xlarge may take 120"
    ) in _refused(fresh)


def test_custom_networking_counts_one_address_a_node_and_is_warned_of(
    mocks: RecordingMocks, caplog: pytest.LogCaptureFixture
) -> None:
    # 100 free would refuse 2 x m7g.2xlarge at 60 each; under custom networking the node subnet
    # holds each node's own address alone, and the ENIConfig's subnet is the owner's to check.
    cni = json.dumps(
        {
            "enableNetworkPolicy": "true",
            "env": {
                "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG": "true",
                "ENI_CONFIG_LABEL_DEF": "topology.kubernetes.io/zone",
            },
        }
    )
    existing_cluster(mocks, free=100, addons={**EXISTING_ADDONS, "vpc-cni": cni})
    run_into_existing(mocks)
    assert one(mocks.records, NODE_GROUP).inputs["subnetIds"] == [ZONE_SUBNET]
    assert (
        "the cluster's vpc-cni uses custom networking (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG): the "
        "stack's nodes select the ENIConfig named us-west-2a and take their pods' addresses from "
        "its subnet, which the room check does not read; check that it exists (without it the "
        "nodes never turn Ready) with a subnet in us-west-2a that has room for every node's "
        "interfaces but the first"
    ) in caplog.text
    fresh = RecordingMocks()
    existing_cluster(fresh, free=1, addons={**EXISTING_ADDONS, "vpc-cni": cni})
    assert (
        f"`existingCluster` {ZONE_SUBNET} has 1 free addresses, but 2 x m7g.2xlarge may take 2 "
        "(1 each" in _refused(fresh)
    )


def test_a_failed_read_that_says_not_found_is_no_absent_add_on(mocks: RecordingMocks) -> None:
    existing_cluster(mocks)
    denied = "AccessDeniedException: not authorized; identity-based policy not found"
    mocks.addons[(EXISTING_CLUSTER, "aws-ebs-csi-driver")] = denied  # type: ignore[assignment]
    assert denied in _refused(mocks)


@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ({"public": (ZONE_SUBNET,)}, "maps public addresses on launch (a public subnet)"),
        (
            {"routes": {ZONE_SUBNET: "igw-0f1e2d3c4b5a69788"}},
            "routes 0.0.0.0/0 to an internet gateway but maps no public address, so its nodes "
            "have no way out",
        ),
        (
            {"routes": {ZONE_SUBNET: ""}},
            "has no default route (0.0.0.0/0) listed in its route table",
        ),
        (
            {"routes": {ZONE_SUBNET: "nat-0dead0dead0dead0de"}},
            "routes 0.0.0.0/0 to a NAT gateway that is gone (deleted or failed)",
        ),
        *[
            ({"nat": nat}, "routes 0.0.0.0/0 to a NAT gateway that is gone (deleted or failed)")
            for nat in ({"state": "deleted"}, {"state": "failed"})
        ],
        *[
            ({"nat": nat}, "routes 0.0.0.0/0 to a NAT gateway that is not an available public one")
            for nat in ({"state": "pending"}, {"connectivityType": "private"})
        ],
        (
            {"routes": {ZONE_SUBNET: "shared"}},
            "has no route table this account owns (a VPC another account shares)",
        ),
        (
            {"routes": {ZONE_SUBNET: "owner"}},
            "has no route table this account owns (a VPC another account shares)",
        ),
    ],
)
def test_only_a_private_subnet_with_a_way_out_is_picked_for_the_nodes(
    mocks: RecordingMocks, kind: dict[str, Any], why: str
) -> None:
    routes = kind.get("routes", {}).get(ZONE_SUBNET)
    existing_cluster(mocks, **{k: v for k, v in kind.items() if k != "nat"})
    mocks.nat_gateways[harness.NAT_GATEWAY] |= kind.get("nat", {})
    if routes in ("shared", "owner"):
        # A participant of a shared VPC sees none of its owner's tables, or sees them owned by it.
        for table in mocks.route_tables.values():
            table["ownerId" if routes == "owner" else "vpcId"] = "999988887777"
    assert (
        "`existingClusterSubnet` is needed: none of platform-shared's subnets in us-west-2a is a "
        f"private one with a way out ({ZONE_SUBNET} {why}); give a private subnet of us-west-2a "
        "in the cluster's VPC (a route to a NAT gateway)"
    ) in _refused(mocks)


def test_a_named_subnet_behind_an_internet_gateway_needs_public_addresses(
    mocks: RecordingMocks,
) -> None:
    existing_cluster(mocks, routes={ZONE_SUBNET: "igw-0f1e2d3c4b5a69788"})
    assert (
        f"`existingClusterSubnet` {ZONE_SUBNET} routes 0.0.0.0/0 to an internet gateway but "
        "maps no public address, so its nodes have no way out; choose a private subnet whose "
        "route table sends 0.0.0.0/0 to a NAT gateway"
    ) in _refused(mocks, {"existingClusterSubnet": ZONE_SUBNET})
    # Through the main table's NAT gateway, once it is deleted: refused too.
    del mocks.route_tables[f"rtb-{ZONE_SUBNET}"]
    mocks.nat_gateways[harness.NAT_GATEWAY]["state"] = "deleted"
    assert (
        f"`existingClusterSubnet` {ZONE_SUBNET} routes 0.0.0.0/0 to a NAT gateway that is gone "
        "(deleted or failed)"
    ) in _refused(mocks, {"existingClusterSubnet": ZONE_SUBNET})
    # One that gives its nodes public addresses, shows no default route, routes through a
    # transit gateway or a private NAT gateway (onward routes are not read) is taken as named.
    kinds = ({"public": (ZONE_SUBNET,)}, {"routes": {ZONE_SUBNET: ""}})
    for kind in (*kinds, {"routes": {ZONE_SUBNET: "tgw-0123456789abcdef0"}}, {}):
        fresh = RecordingMocks()
        existing_cluster(fresh, **kind)
        fresh.nat_gateways[harness.NAT_GATEWAY]["connectivityType"] = "private"
        run_into_existing(fresh, {"existingClusterSubnet": ZONE_SUBNET})
        (group,) = by_type(fresh.records, NODE_GROUP)
        assert group.inputs["subnetIds"] == [ZONE_SUBNET]
        # Only the planned zone's route tables are read.
        read = [c.args for c in fresh.calls if c.token == "aws:ec2/getRouteTables:getRouteTables"]
        assert {f["values"][0] for a in read for f in a["filters"]} <= {ZONE_SUBNET, "true"}


def test_a_zone_that_does_not_offer_the_graviton_type_is_refused(mocks: RecordingMocks) -> None:
    existing_cluster(mocks)
    mocks.zones_without_offerings = {"usw2-az2"}
    assert (
        "`availabilityZone` us-west-2a (usw2-az2) does not offer m7g.2xlarge; choose a zone "
        "that does (us-west-2b, us-west-2c, us-west-2d), or another `instanceType`"
    ) in _refused(mocks)


def test_roles_the_bootstrap_fenced_to_another_cluster_are_refused(mocks: RecordingMocks) -> None:
    existing_cluster(mocks)
    mocks.existing |= bootstrap_roles("dev")
    assert (
        "`existingCluster` platform-shared is not the cluster the bootstrap fenced the dev "
        "stack's roles and deploy role to (gemma-graviton-dev); run the bootstrap's `pulumi up` "
        "again with `existingCluster` in stacks/Pulumi.dev.yaml"
    ) in _refused(mocks, bootstrapped=False)


def test_the_stack_creates_only_the_pod_identity_agent_the_cluster_lacks(
    mocks: RecordingMocks,
) -> None:
    existing_cluster(mocks, addons={**EXISTING_ADDONS, **_VOLUMES, "eks-pod-identity-agent": None})
    run_into_existing(mocks, {"modelCache": "volume"})
    assert _addon_names(mocks) == {"eks-pod-identity-agent"}
    # The next `up` reads it present: the cluster's from then on, whoever's tags it carries. Not
    # declared again (its creation would fail on what runs), and never deleted (retained below).
    for tags in ({"project": "gemma-graviton", "stack": "dev"}, {"stack": "prod"}):
        again = RecordingMocks()
        existing_cluster(again, addons={**EXISTING_ADDONS, **_VOLUMES})
        again.addons[(EXISTING_CLUSTER, "eks-pod-identity-agent")]["tags"] = tags
        run_into_existing(again, {"modelCache": "volume"})
        assert _addon_names(again) == set(), tags
    # Objects someone else made in the cluster fail the add-on's creation, never overwritten;
    # and the stack never deletes it: another team may rely on it, and a stack that no longer
    # reads it as its own would delete it by name.
    for addon in by_type(mocks.records, ADDON):
        assert addon.inputs["resolveConflictsOnCreate"] == "NONE", addon.urn
        assert addon.urn in mocks.monitor.retained, addon.urn


def test_the_cluster_wide_add_ons_are_never_the_stacks(mocks: RecordingMocks) -> None:
    # Without the CloudWatch add-on: no add-on, log group or association of Container Insights
    # (the owner's teams' logs and a self-managed agent's credentials are left alone).
    existing_cluster(mocks, addons={"vpc-cni": EXISTING_ADDONS["vpc-cni"]})
    run_into_existing(mocks, {"monitoring": False})
    assert _addon_names(mocks) == set()
    assert by_type(mocks.records, "aws:cloudwatch/logGroup:LogGroup") == []
    assert by_type(mocks.records, "aws:eks/podIdentityAssociation:PodIdentityAssociation") == []


def test_a_cluster_with_every_add_on_gets_none(
    mocks: RecordingMocks, exports: dict[str, Any]
) -> None:
    existing_cluster(mocks, addons={**EXISTING_ADDONS, **_VOLUMES})
    run_into_existing(mocks, {"modelCache": "volume"})
    assert _addon_names(mocks) == set()
    one(mocks.records, "kubernetes:storage.k8s.io/v1:StorageClass")
    assert by_type(mocks.records, "aws:cloudwatch/logGroup:LogGroup")[0].name == "watch-emf"
    assert resolve(exports["logGroup"]) == f"/aws/containerinsights/{EXISTING_CLUSTER}/application"


#: Everything the dev stack creates in `EXISTING_CLUSTER` as it runs (vpc-cni, the Pod
#: Identity agent and the CloudWatch add-on; monitoring on, weights on the node disk): exactly what
#: `pulumi destroy` deletes. The cluster, its VPC, subnets, add-ons and access entries are no
#: resource of the stack, so destroy cannot touch them.
DESTROYED = sorted(
    [
        ("aws:cloudwatch/dashboard:Dashboard", "watch-dashboard"),
        ("aws:cloudwatch/logGroup:LogGroup", "watch-emf"),
        ("aws:cloudwatch/logMetricFilter:LogMetricFilter", "watch-answers-2xx"),
        ("aws:cloudwatch/logMetricFilter:LogMetricFilter", "watch-answers-401"),
        ("aws:cloudwatch/logMetricFilter:LogMetricFilter", "watch-answers-413"),
        ("aws:cloudwatch/logMetricFilter:LogMetricFilter", "watch-answers-429"),
        ("aws:cloudwatch/logMetricFilter:LogMetricFilter", "watch-answers-5xx"),
        ("aws:cloudwatch/metricAlarm:MetricAlarm", "watch-group-restart"),
        ("aws:cloudwatch/metricAlarm:MetricAlarm", "watch-kv-cache-full"),
        ("aws:cloudwatch/metricAlarm:MetricAlarm", "watch-no-healthy-target"),
        ("aws:cloudwatch/metricAlarm:MetricAlarm", "watch-no-metrics"),
        ("aws:cloudwatch/metricAlarm:MetricAlarm", "watch-requests-waiting"),
        ("aws:cloudwatch/metricAlarm:MetricAlarm", "watch-server-errors"),
        ("aws:ec2/launchTemplate:LaunchTemplate", "eks-node-lt"),
        ("aws:eks/nodeGroup:NodeGroup", "eks-nodes"),
        ("aws:eks/podIdentityAssociation:PodIdentityAssociation", "watch-collector-identity"),
        ("aws:sns/topic:Topic", "watch-alarms"),
        ("command:local:Command", "model-target-groups"),
        ("kubernetes:apps/v1:Deployment", "watch-collector"),
        ("kubernetes:batch/v1:Job", "lws-webhook-gate"),
        ("kubernetes:core/v1:ConfigMap", "lws-gate-probe"),
        ("kubernetes:core/v1:ConfigMap", "model-gatekeeper"),
        ("kubernetes:core/v1:ConfigMap", "model-programs"),
        ("kubernetes:core/v1:ConfigMap", "watch-collector-config"),
        ("kubernetes:core/v1:Namespace", "lws-ns"),
        ("kubernetes:core/v1:Namespace", "model-ns"),
        ("kubernetes:core/v1:Secret", "model-api-key"),
        ("kubernetes:core/v1:Secret", "model-hf-token"),
        ("kubernetes:core/v1:Service", "model-svc"),
        ("kubernetes:core/v1:ServiceAccount", "lws-gate-sa"),
        ("kubernetes:core/v1:ServiceAccount", "watch-collector-sa"),
        ("kubernetes:helm.sh/v4:Chart", "lws-chart"),
        ("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet", "model-lws"),
        ("kubernetes:networking.k8s.io/v1:NetworkPolicy", "model-netpol"),
        ("kubernetes:rbac.authorization.k8s.io/v1:Role", "lws-gate-role"),
        ("kubernetes:rbac.authorization.k8s.io/v1:Role", "watch-collector-role"),
        ("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "lws-gate-binding"),
        ("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "watch-collector-binding"),
        ("random:index/randomPassword:RandomPassword", "model-api-key"),
        ("random:index/randomPassword:RandomPassword", "model-engine-key"),
        ("time:index/sleep:Sleep", "watch-collector-identity-settled"),
    ]
)
#: What the stack reads and never deletes: the bootstrap's roles (no cluster role).
READ_ONLY = sorted(
    ("aws:iam/role:Role", f"role-{key}")
    for key in ("nodes", "ebs-csi", "cloudwatch-agent", "collector")
)


def test_destroy_removes_exactly_what_the_stack_created(mocks: RecordingMocks) -> None:
    existing_cluster(mocks)
    run_into_existing(mocks)
    assert sorted((r.type_, r.name) for r in created(mocks)) == DESTROYED
    assert sorted((r.type_, r.name) for r in mocks.records if r.read) == READ_ONLY
    # In an order that leaves nothing behind: the add-on and the load balancer's Service before
    # the nodes they run on (`test_destroy_order`'s rule for a cluster the stack creates).
    graph = _closure(mocks)
    nodes = one(mocks.records, NODE_GROUP)
    for first in [*by_type(mocks.records, ADDON), named(mocks.records, *harness.MODEL_SERVICE)]:
        assert nodes.urn in graph[first.urn], f"destroy must delete {first.urn} before the nodes"


def test_a_private_endpoint_is_warned_of_before_anything_is_made(
    mocks: RecordingMocks, caplog: pytest.LogCaptureFixture
) -> None:
    existing_cluster(mocks)
    mocks.clusters[EXISTING_CLUSTER]["vpcConfig"]["endpointPublicAccess"] = False
    run_into_existing(mocks)
    assert "platform-shared: its Kubernetes API endpoint is private" in caplog.text
