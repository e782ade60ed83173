"""`existingCluster`: the keys that go with it and against it, the planner's account of what it
reads and assumes, and the pure checks the program feeds with what it read."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from infra.adapters.cli import main
from infra.plan import changes, existing, zones
from infra.plan.config import ConfigError, StackConfig
from infra.plan.loading import load_config
from infra.plan.sizing import plan

BASE = {"owner": "ml-platform", "endDate": "2027-06-30"}
INTO = {**BASE, "existingCluster": "platform-shared", "lwsInstalled": False}


def _refusal(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as raised:
        load_config(raw)
    return str(raised.value)


def test_the_endpoint_ranges_are_required_without_an_existing_cluster_only() -> None:
    cfg = load_config(INTO)
    assert cfg.existing_cluster == "platform-shared" and cfg.endpoint_public_access_cidrs is None
    assert _refusal(BASE) == (
        "`endpointPublicAccessCidrs` is required; list the IPv4 ranges of your operators and CI "
        "runners, such as 198.51.100.0/24"
    )
    assert _refusal({"owner": "ml-platform"}).startswith(
        "`endpointPublicAccessCidrs` and `endDate` are required; "
    )
    assert _refusal(
        {"owner": "ml-platform", "existingCluster": "x", "lwsInstalled": True}
    ).startswith("`endDate` is required; ")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("vpcCidr", "10.9.0.0/16"),
        ("nodeSubnets", "public"),
        ("controlPlaneZone", "us-west-2b"),
        ("endpointPublicAccessCidrs", ["198.51.100.0/24"]),
        ("clusterAdminArns", ["arn:aws:iam::210987654321:role/admin"]),
        ("clusterViewerArns", ["arn:aws:iam::210987654321:role/viewer"]),
    ],
)
def test_keys_of_the_network_and_cluster_the_stack_creates_are_refused(
    key: str, value: Any
) -> None:
    assert _refusal({**INTO, key: value}) == (
        f"`{key}` shapes the network or cluster the stack creates, but with `existingCluster` "
        "(platform-shared) it creates neither and changes nothing of the cluster's; remove it "
        "(the cluster's owner manages its network, endpoint and access)"
    )


def test_lws_installed_must_be_written_with_an_existing_cluster() -> None:
    raw = {k: v for k, v in INTO.items() if k != "lwsInstalled"}
    assert _refusal(raw) == (
        "`lwsInstalled` must be written with `existingCluster` (platform-shared): false installs "
        "the stack's LeaderWorkerSet controller, which clashes with one the cluster runs; true "
        "uses the cluster's; write false if `pulumi stack --show-urns` lists an LwsController "
        "(this stack installed LWS already) or the cluster runs no LWS; true only where the "
        "cluster's owner runs it (`kubectl get deploy -A | grep lws-controller-manager`, not the "
        "stack's)"
    )


def test_flipping_lws_installed_says_what_happens_in_the_cluster() -> None:
    cfg = _cfg()
    (cost,) = [c for c in changes.change_costs(plan(cfg)) if "lwsInstalled" in c.keys]
    assert cost.kind == "LWS controller" and "new VPC" not in cost.effect
    assert "the CRDs stay once an `up` with false on this version recorded them" in cost.effect
    assert "before that they, and every LeaderWorkerSet, go" in cost.effect
    assert cost.outage.startswith("none")


def test_an_elastic_stack_into_an_existing_cluster_is_refused() -> None:
    assert _refusal({**INTO, "minGroups": 0, "maxGroups": 2}).startswith(
        "`minGroups` makes the stack elastic, which installs a Cluster Autoscaler and KEDA"
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [("existingClusterSubnet", "subnet-0aaa1111bbbb2222c"), ("lwsInstalled", True)],
)
def test_the_companions_of_existing_cluster_need_it(key: str, value: Any) -> None:
    raw = {**BASE, "endpointPublicAccessCidrs": ["198.51.100.0/24"], key: value}
    assert _refusal(raw) == (
        f"`{key}` is read only with `existingCluster` (a cluster the stack creates has its own "
        "subnets and no LWS); remove it, or set `existingCluster`"
    )


def test_the_planner_names_what_it_reads_and_assumes(capsys: pytest.CaptureFixture[str]) -> None:
    # The dev stack file's endpoint ranges and access entries are left out of the what-if.
    into = ["--set", "existingCluster=platform-shared", "--set", "lwsInstalled=false"]
    assert main(["--stack", "dev", *into]) == 0
    out = capsys.readouterr().out
    assert "into the existing cluster platform-shared, the program reads:" in out
    for line in (*existing.READS, *existing.ASSUMES):
        assert f"  - {line}\n" in out
    assert "eks control plane" not in out and "nat gateway" not in out
    assert main(["--stack", "dev", *into, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["existing_cluster"]["reads"] == list(existing.READS)
    assert main(["--stack", "dev", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["existing_cluster"] is None


def _cfg(**keys: Any) -> StackConfig:
    return load_config({**INTO, **keys})


CLUSTER = existing.ClusterFacts(
    name="platform-shared",
    version="1.35",
    endpoint="https://x.eks.amazonaws.com",
    certificate="Q0E=",
    oidc_issuer=None,
    security_group="sg-1",
    vpc_id="vpc-1",
    subnet_ids=("subnet-a", "subnet-b"),
    account="111122223333",
)


def test_the_nodes_subnet_is_never_picked_by_its_free_addresses() -> None:
    # A node group's subnets are ForceNew: a pick by free addresses could differ on the next
    # `up` and replace the node group. Two qualifying subnets need a named one.
    subnets = [
        existing.SubnetFacts("subnet-0aaa1111bbbb2222a", "vpc-1", "us-west-2a", "usw2-az2", 500),
        existing.SubnetFacts("subnet-b", "vpc-1", "us-west-2a", "usw2-az2", 900),
        existing.SubnetFacts("subnet-c", "vpc-1", "us-west-2b", "usw2-az1", 4000),
    ]
    cfg = _cfg()
    with pytest.raises(ConfigError) as raised:
        existing.node_subnet(cfg, plan(cfg), "usw2-az2", CLUSTER, subnets)
    assert str(raised.value) == (
        "`existingClusterSubnet` is needed: platform-shared has 2 private subnets with a way out "
        "in us-west-2a (subnet-0aaa1111bbbb2222a (500 free), subnet-b (900 free)), and the "
        "nodes' subnet cannot change without replacing the node group; set it to one of them; "
        "for a deployed stack, "
        "the one its node group uses (`aws eks describe-nodegroup` of its eks-nodes-* group, "
        "`nodegroup.subnets`)"
    )
    named = _cfg(existingClusterSubnet="subnet-0aaa1111bbbb2222a")
    assert existing.node_subnet(named, plan(named), "usw2-az2", CLUSTER, subnets) == subnets[0]


@pytest.mark.parametrize(
    "values",
    [
        '{"enableNetworkPolicy": "true"}',
        'enableNetworkPolicy: "true"',
        "enableNetworkPolicy: true\nenv:\n  ENABLE_PREFIX_DELEGATION: 'true'\n",
        '{\n\t"enableNetworkPolicy": "true"\n}',  # JSON indented with a tab, which YAML refuses
    ],
)
def test_vpc_cni_values_are_read_as_json_or_yaml(values: str) -> None:
    # EKS takes an add-on's configuration values as JSON or YAML.
    cfg = _cfg(monitoring=False)
    assert existing.owned_addons(cfg, plan(cfg), {"vpc-cni": values}) == ()


def _prefixes(subnet: str = "the node subnet") -> str:
    return (
        "the cluster's vpc-cni delegates prefixes (ENABLE_PREFIX_DELEGATION): its nodes take /28 "
        "blocks of 16 addresses, which the subnet room check does not count; check that "
        f"{subnet} has free /28 blocks for every node"
    )


def _custom(eni_config: str) -> str:
    return (
        "the cluster's vpc-cni uses custom networking (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG): the "
        f"stack's nodes select {eni_config} and take their pods' addresses from its subnet, "
        "which the room check does not read; check that it exists (without it the nodes never "
        "turn Ready) with a subnet in us-west-2a that has room for every node's interfaces but "
        "the first"
    )


def _env(**env: str) -> str:
    return json.dumps({"enableNetworkPolicy": "true", "env": env})


CUSTOM = "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG"
ZONE_NAMED = "the ENIConfig named us-west-2a"


@pytest.mark.parametrize(
    ("values", "warned"),
    [
        ('{"enableNetworkPolicy": "true"}', []),
        (_env(ENABLE_PREFIX_DELEGATION="false"), []),
        (_env(ENABLE_PREFIX_DELEGATION="true"), [_prefixes()]),
        ("env:\n  ENABLE_PREFIX_DELEGATION: 'true'\n", [_prefixes()]),
        (_env(**{CUSTOM: "false"}), []),
        # As Go's strconv.ParseBool reads it: "1" and "T" are true, "tRUE" is not.
        (_env(**{CUSTOM: "tRUE"}), []),
        (_env(**{CUSTOM: "1"}), [_custom("the ENIConfig named default")]),
        (
            "env:\n  AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG: 'T'\n  ENABLE_PREFIX_DELEGATION: 'true'\n"
            "  ENI_CONFIG_LABEL_DEF: topology.kubernetes.io/zone\n",
            [_prefixes(f"{ZONE_NAMED}'s subnet"), _custom(ZONE_NAMED)],
        ),
        (
            _env(
                **{CUSTOM: "true", "ENI_CONFIG_LABEL_DEF": "failure-domain.beta.kubernetes.io/zone"}
            ),
            [_custom(ZONE_NAMED)],
        ),
        (
            _env(**{CUSTOM: "true", "ENI_CONFIG_LABEL_DEF": "topology.k8s.aws/zone-id"}),
            [_custom("the ENIConfig named usw2-az2")],
        ),
        (
            _env(**{CUSTOM: "true", "ENI_CONFIG_LABEL_DEF": ""}),
            [_custom("the ENIConfig named default")],
        ),
        (
            _env(**{CUSTOM: "true", "ENI_CONFIG_LABEL_DEF": "team"}),
            [_custom("the ENIConfig their label team names")],
        ),
        ("not: [valid", []),
    ],
)
def test_a_cni_whose_addresses_the_room_check_cannot_count_is_warned_of(
    values: str, warned: list[str]
) -> None:
    # Prefixes take /28 blocks of 16 addresses, custom networking takes pods' addresses from an
    # ENIConfig's subnet; the room check counts the node subnet's addresses one by one.
    zone = zones.Zone("us-west-2a", "usw2-az2")
    assert existing.cni_warnings({"vpc-cni": values}, zone) == warned


@pytest.mark.parametrize(
    ("env", "custom"),
    [({CUSTOM: "true"}, True), ({CUSTOM: "true", "ENABLE_POD_ENI": "true"}, False), ({}, False)],
)
def test_custom_networking_without_pod_security_groups_counts_the_node_alone(
    env: dict[str, str], custom: bool
) -> None:
    # With security groups for pods, trunk and branch interfaces may go into the node subnet.
    assert existing.custom_networking({"vpc-cni": _env(**env)}) is custom


def test_the_nodes_subnet_is_a_private_one() -> None:
    cfg = _cfg()
    subnets = [
        existing.SubnetFacts("subnet-a", "vpc-1", "us-west-2a", "usw2-az2", 4000, public=True),
        existing.SubnetFacts("subnet-b", "vpc-1", "us-west-2a", "usw2-az2", 900),
    ]
    chosen = existing.node_subnet(cfg, plan(cfg), "usw2-az2", CLUSTER, subnets)
    assert chosen.subnet_id == "subnet-b"


def test_a_subnet_of_another_vpc_is_refused() -> None:
    cfg = _cfg(existingClusterSubnet="subnet-0aaa1111bbbb2222c")
    other = existing.SubnetFacts("subnet-0aaa1111bbbb2222c", "vpc-2", "us-west-2a", "usw2-az2", 900)
    with pytest.raises(ConfigError, match="is in vpc-2, not in platform-shared's VPC vpc-1"):
        existing.node_subnet(cfg, plan(cfg), "usw2-az2", CLUSTER, [other])


def test_the_addresses_of_a_node_follow_eni_max_pods() -> None:
    # eni-max-pods: m7g.2xlarge 58 (4 interfaces of 15 addresses: 4 x 14 + 2), m7g.large 29.
    assert existing.addresses_per_node("m7g.2xlarge") == 60
    assert existing.addresses_per_node("m7g.large") == 31
    # Custom networking: pods' interfaces are in the ENIConfig's subnet, never the primary one.
    assert existing.addresses_per_node("m7g.2xlarge", custom_networking=True) == 1


def test_the_stack_owns_at_most_the_pod_identity_agent() -> None:
    cni = {"vpc-cni": '{"enableNetworkPolicy": "true"}'}
    cfg = _cfg(modelCache="volume")
    everything = {**cni, **dict.fromkeys(existing.CHECKED_ADDONS[1:], "")}
    assert existing.owned_addons(cfg, plan(cfg), everything) == ()
    del everything["eks-pod-identity-agent"]
    assert existing.owned_addons(cfg, plan(cfg), everything) == ("eks-pod-identity-agent",)
    quiet = _cfg(monitoring=False)
    assert existing.owned_addons(quiet, plan(quiet), cni) == ()
    # What the stack made is present on its next read, and stays its own (else that `up` would
    # delete it): add-ons a stack made before it stopped making them. The agent it created is
    # the cluster's from then on (never deleted; declaring it again would fail its creation).
    assert existing.owned_addons(
        cfg,
        plan(cfg),
        everything | {"eks-pod-identity-agent": ""},
        {
            "eks-pod-identity-agent",
            "amazon-cloudwatch-observability",
            "aws-ebs-csi-driver",
        },
    ) == ("amazon-cloudwatch-observability", "aws-ebs-csi-driver")
    assert existing.owned_addons(cfg, plan(cfg), everything, {"aws-ebs-csi-driver"}) == (
        "aws-ebs-csi-driver", "eks-pod-identity-agent",
    )  # fmt: skip
    # Without the volumes the driver would go, with every team's volumes: refused.
    with pytest.raises(ConfigError, match="installed aws-ebs-csi-driver in platform-shared"):
        existing.owned_addons(quiet, plan(quiet), everything, {"aws-ebs-csi-driver"})
    assert existing.logs_warning(quiet, cni) == (
        "`existingCluster` platform-shared runs no amazon-cloudwatch-observability add-on, so no "
        "log of the model is kept: vLLM's start-up errors die with the pods LWS deletes; have its "
        "owner install amazon-cloudwatch-observability (the stack installs none in a cluster it "
        "does not own)"
    )
    assert existing.logs_warning(quiet, everything) is None


def test_an_endpoint_the_runner_may_not_reach_is_warned_of() -> None:
    assert existing.endpoint_warning(CLUSTER) is None  # open to every address
    assert existing.endpoint_warning(replace(CLUSTER, public_cidrs=None)) == (
        "`existingCluster` platform-shared: its Kubernetes API endpoint is private, so `pulumi "
        "up` must run inside its VPC or a network peered with it (a self-hosted CI runner there "
        "can; GitHub's hosted runners cannot)"
    )
    narrow = replace(CLUSTER, public_cidrs=("203.0.113.0/24", "198.51.100.7/32"))
    assert existing.endpoint_warning(narrow) == (
        "`existingCluster` platform-shared: its public endpoint admits only 203.0.113.0/24, "
        "198.51.100.7/32; run `pulumi up` from there or inside its VPC"
    )
