"""The Network and Cluster components under the recording mocks, without the program.

Policy checked here: one node zone (nodes, NAT), a control plane in two zones, Graviton nodes on
AL2023 arm64 with a fixed size, an encrypted gp3 root volume of the planned size, IMDSv2 with a hop
limit of 1, API-only cluster authentication, the bootstrap's roles for the control plane and the
nodes (the cluster creates no IAM and no OIDC provider), the Pod Identity agent after the nodes,
and a secret kubeconfig feeding the one Kubernetes provider.
"""

from __future__ import annotations

import base64
from typing import Any, Literal

import pulumi
import pulumi_aws as aws
import pytest
import yaml

from components.cluster import AMI_TYPE, IDENTITY_AGENT, Cluster, ClusterArgs
from components.manifests import identity
from components.network import Network, NetworkArgs
from components.stack_roles import existing_roles
from infra.plan import addons, iam
from tests.fakes.pulumi_mocks import (
    ACCOUNT_ID,
    Recorded,
    RecordingMocks,
    by_type,
    is_secret,
    named,
    one,
    resolve,
    run,
)
from tests.program.harness import bootstrap_roles

CIDR = "10.42.0.0/16"
NODE_ZONE = "us-west-2a"
SECOND_ZONE = "us-west-2b"
INSTANCE_TYPE = "m7g.2xlarge"
NODE_COUNT = 2
DISK_GIB = 100
LABELS = {"gemma-graviton.dev/pool": "model"}
OPERATORS = ("198.51.100.0/24",)
ADMIN = "arn:aws:iam::123456789012:role/platform-admin"
VIEWER = "arn:aws:iam::123456789012:user/auditor"
ACCESS_ENTRY = "aws:eks/accessEntry:AccessEntry"
ACCESS_POLICY = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"

VPC = "aws:ec2/vpc:Vpc"
SUBNET = "aws:ec2/subnet:Subnet"
EIP = "aws:ec2/eip:Eip"
NAT = "aws:ec2/natGateway:NatGateway"
ROUTE_TABLE = "aws:ec2/routeTable:RouteTable"
ASSOCIATION = "aws:ec2/routeTableAssociation:RouteTableAssociation"
EKS_CLUSTER = "eks:index:Cluster"
NODE_GROUP = "eks:index:ManagedNodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
ROLE = "aws:iam/role:Role"
ADDON = "aws:eks/addon:Addon"
K8S_PROVIDER = "pulumi:providers:kubernetes"
NETWORK_COMPONENT = "gemma-graviton:network:Network"
CLUSTER_COMPONENT = "gemma-graviton:cluster:Cluster"
#: The reads of the bootstrap's roles (`existing_roles`, as the program makes them).
NODE_ROLE = "role-nodes"
SERVICE_ROLE = "role-cluster"


def bootstrap_role_args(
    mocks: RecordingMocks, opts: pulumi.ResourceOptions | None = None
) -> dict[str, aws.iam.Role]:
    """The `service_role` and `node_role` arguments as the program passes them: the roles the
    bootstrap made for the dev stack, read by name (call inside `run`)."""
    mocks.existing |= bootstrap_roles("dev")
    roles = existing_roles("role", "dev", ["cluster", "nodes"], opts or pulumi.ResourceOptions())
    return {"service_role": roles["cluster"], "node_role": roles["nodes"]}


def deploy(
    mocks: RecordingMocks,
    node_subnets: Literal["private", "public"] = "private",
    with_aws_provider: bool = False,
) -> tuple[Network, Cluster]:
    """Create the network and the cluster on it, as the program wires them (optionally through
    an explicit AWS provider, as the program does)."""

    def program() -> tuple[Network, Cluster]:
        provider = aws.Provider("aws", region="us-west-2") if with_aws_provider else None
        opts = pulumi.ResourceOptions(providers=[provider]) if provider else None
        roles = bootstrap_role_args(mocks, pulumi.ResourceOptions(provider=provider))
        network = Network(
            "net",
            NetworkArgs(
                cidr_block=CIDR,
                node_zone=NODE_ZONE,
                second_zone=SECOND_ZONE,
                node_subnets=node_subnets,
            ),
            opts=opts,
        )
        args = cluster_args(
            vpc_id=network.vpc_id,
            control_plane_subnet_ids=network.control_plane_subnet_ids,
            node_subnet_id=network.node_subnet_id,
            public_access_cidrs=OPERATORS,
            admin_arns=(ADMIN,),
            viewer_arns=(VIEWER,),
            addon_versions=addons.pinned("1.34") or {},
            **roles,
        )
        cluster = Cluster("gemma", args, opts=opts)
        return network, cluster

    return run(program)


def subnet_by_id(records: list[Recorded], subnet_id: str) -> Recorded:
    matches = [r for r in by_type(records, SUBNET) if r.resource_id == subnet_id]
    assert len(matches) == 1, f"no single subnet with id {subnet_id}: {[r.urn for r in matches]}"
    return matches[0]


def subnet_in(records: list[Recorded], tier: str, zone: str) -> Recorded:
    matches = [
        r
        for r in by_type(records, SUBNET)
        if r.inputs["availabilityZone"] == zone and r.name.startswith(f"net-{tier}-")
    ]
    assert len(matches) == 1, f"expected one {tier} subnet in {zone}: {[r.urn for r in matches]}"
    return matches[0]


# -- the node group ------------------------------------------------------------------------------


def test_node_group_is_fixed_size_graviton_in_the_node_subnet_from_its_template(
    mocks: RecordingMocks,
) -> None:
    # The node subnet, private or public: test_nodes_reach_out_through_a_nat_gateway_or_public_ips.
    deploy(mocks)
    group = one(mocks.records, NODE_GROUP)
    inputs = group.inputs

    assert inputs["instanceTypes"] == [INSTANCE_TYPE], group.urn
    assert inputs["amiType"] == AMI_TYPE == "AL2023_ARM_64_STANDARD", group.urn
    assert inputs["capacityType"] == "ON_DEMAND", group.urn
    assert inputs["scalingConfig"] == {
        "minSize": NODE_COUNT,
        "desiredSize": NODE_COUNT,
        "maxSize": NODE_COUNT,
    }, group.urn
    assert inputs["labels"] == LABELS, group.urn
    # The launch template and the cluster (the role: the bootstrap's, below).
    template = one(mocks.records, LAUNCH_TEMPLATE)
    eks_cluster = one(mocks.records, EKS_CLUSTER)

    assert group.inputs["launchTemplate"] == {
        "id": template.resource_id,
        "version": str(template.outputs["latestVersion"]),
    }, group.urn
    # EKS rejects a node group that sets diskSize beside a launch template.
    assert "diskSize" not in group.inputs, group.urn
    assert group.inputs["cluster"]["urn"] == eks_cluster.urn, group.urn


def test_launch_template_sets_the_root_volume_imdsv2_and_the_static_cpu_manager(
    mocks: RecordingMocks,
) -> None:
    """vLLM binds a thread per CPU it sees: the pod must see only its own, exclusive CPUs."""
    deploy(mocks)
    template = one(mocks.records, LAUNCH_TEMPLATE)
    (mapping,) = template.inputs["blockDeviceMappings"]
    assert mapping["deviceName"] == "/dev/xvda", template.urn
    ebs = mapping["ebs"]
    assert (ebs["volumeSize"], ebs["volumeType"], ebs["encrypted"]) == (DISK_GIB, "gp3", "true")
    assert template.inputs["metadataOptions"] == {
        "httpEndpoint": "enabled",
        "httpTokens": "required",
        "httpPutResponseHopLimit": 1,
    }, template.urn
    user_data = base64.b64decode(template.inputs["userData"]).decode()
    assert "Content-Type: application/node.eks.aws" in user_data, template.urn
    document = user_data.split("---\n", 1)[1].split("\n--//--")[0]
    node_config = yaml.safe_load(document)
    assert node_config["kind"] == "NodeConfig"
    assert node_config["spec"]["kubelet"]["config"]["cpuManagerPolicy"] == "static"


def bootstrap_arn(key: str) -> str:
    """The ARN of the dev stack's bootstrap role `key`: under the stack's path, which is all a
    deploy role may pass (`infra.plan.iam.role_path`)."""
    return f"arn:aws:iam::{ACCOUNT_ID}:role{iam.role_path('dev')}{identity.role_name('dev', key)}"


def test_the_nodes_and_the_cluster_run_as_the_bootstrap_roles(mocks: RecordingMocks) -> None:
    """The node role's trust and policies are the bootstrap's
    (tests/components/test_stack_roles.py). Given a service role, pulumi-eks creates none of its
    own (nodejs/eks/cluster/cluster.ts `createCore`, `if (!args.serviceRole)`, master at
    7bf0c1b), which the deploy role could not: it writes no IAM."""
    _, cluster = deploy(mocks)
    role = named(mocks.records, ROLE, NODE_ROLE)
    group = one(mocks.records, NODE_GROUP)
    assert role.outputs["arn"] == bootstrap_arn("nodes"), role.urn
    assert group.inputs["nodeRoleArn"] == bootstrap_arn("nodes"), group.urn
    assert resolve(cluster.node_role_name) == identity.role_name("dev", "nodes"), role.urn
    assert resolve(cluster.node_role_arn) == bootstrap_arn("nodes"), role.urn
    service = named(mocks.records, ROLE, SERVICE_ROLE)
    eks_cluster = one(mocks.records, EKS_CLUSTER)
    assert service.outputs["arn"] == bootstrap_arn("cluster"), service.urn
    assert eks_cluster.inputs["serviceRole"]["urn"] == service.urn, eks_cluster.urn


def test_the_cluster_refuses_to_run_without_the_bootstrap_roles(mocks: RecordingMocks) -> None:
    with pytest.raises(ValueError) as refused:
        run(lambda: Cluster("gemma", cluster_args()))
    assert str(refused.value) == (
        "`service_role` and `node_role` are the bootstrap's roles; pass both"
    )
    assert by_type(mocks.records, EKS_CLUSTER) == []


def test_the_pod_identity_agent_is_pinned_and_comes_after_the_nodes(
    mocks: RecordingMocks,
) -> None:
    """A DaemonSet add-on turns ACTIVE only once its pods run, and on destroy goes before the
    nodes; the pods that call AWS wait for it (tests/components/test_addons.py)."""
    _, cluster = deploy(mocks)
    (agent,) = [a for a in by_type(mocks.records, ADDON) if a.inputs["addonName"] == IDENTITY_AGENT]
    group = one(mocks.records, NODE_GROUP)

    assert IDENTITY_AGENT == "eks-pod-identity-agent"
    assert agent.inputs["addonVersion"] == addons.pinned("1.34")[IDENTITY_AGENT], agent.urn
    assert agent.inputs["clusterName"] == resolve(cluster.cluster_name), agent.urn
    assert group.urn in mocks.monitor.dependencies[agent.urn], agent.urn
    assert resolve(cluster.identity_agent.urn) == agent.urn


# -- the control plane ---------------------------------------------------------------------------


def test_cluster_uses_api_auth_logging_no_oidc_and_no_default_node_group(
    mocks: RecordingMocks,
) -> None:
    deploy(mocks)
    eks_cluster = one(mocks.records, EKS_CLUSTER)
    inputs = eks_cluster.inputs

    assert inputs["authenticationMode"] == "API", eks_cluster.urn
    assert inputs["enabledClusterLogTypes"] == ["api", "audit", "authenticator"], eks_cluster.urn
    assert inputs["skipDefaultNodeGroup"] is True, eks_cluster.urn
    # The pods get their roles through EKS Pod Identity: no OIDC provider, no IRSA trust.
    assert inputs["createOidcProvider"] is False, eks_cluster.urn
    # The public endpoint admits only the operators' ranges; nodes use the private one.
    assert inputs["endpointPublicAccess"] is True, eks_cluster.urn
    assert inputs["publicAccessCidrs"] == list(OPERATORS), eks_cluster.urn
    assert inputs["endpointPrivateAccess"] is True, eks_cluster.urn
    assert inputs["version"] == "1.34", eks_cluster.urn
    # Managed node groups get their access entry from EKS; no aws-auth role mapping is needed.
    assert "instanceRoles" not in inputs and "instanceRole" not in inputs, eks_cluster.urn
    assert inputs["vpcId"] == one(mocks.records, VPC).resource_id, eks_cluster.urn
    assert inputs["vpcCniOptions"]["enableNetworkPolicy"] is True, eks_cluster.urn


def test_listed_principals_get_cluster_scoped_access_entries_that_outlive_the_objects(
    mocks: RecordingMocks,
) -> None:
    _, cluster = deploy(mocks)
    eks_name = resolve(cluster.cluster_name)
    entries = {r.inputs["principalArn"]: r for r in by_type(mocks.records, ACCESS_ENTRY)}
    assert set(entries) == {ADMIN, VIEWER}
    for entry in entries.values():
        assert entry.inputs["clusterName"] == eks_name, entry.urn
        assert entry.inputs["type"] == "STANDARD", entry.urn
    policies = {r.inputs["principalArn"]: r for r in by_type(mocks.records, ACCESS_POLICY)}
    assert policies[ADMIN].inputs["policyArn"] == (
        "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
    )
    assert policies[VIEWER].inputs["policyArn"] == (
        "arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminViewPolicy"
    )
    for policy in policies.values():
        assert policy.inputs["accessScope"] == {"type": "cluster"}, policy.urn
        assert policy.inputs["clusterName"] == eks_name, policy.urn
    # Kubernetes objects are deleted before the access entries (through the provider).
    provider = one(mocks.records, K8S_PROVIDER)
    depends = mocks.monitor.dependencies[provider.urn]
    for record in [*entries.values(), *policies.values()]:
        assert record.urn in depends, (provider.urn, record.urn)


def test_no_operator_ranges_means_no_public_endpoint(mocks: RecordingMocks) -> None:
    def program() -> None:
        roles = bootstrap_role_args(mocks)
        addon_versions = addons.pinned("1.35") or {}
        Cluster(
            "gemma", cluster_args(kubernetes_version="1.35", addon_versions=addon_versions, **roles)
        )

    run(program)
    inputs = one(mocks.records, EKS_CLUSTER).inputs
    assert inputs["endpointPublicAccess"] is False
    assert "publicAccessCidrs" not in inputs
    assert by_type(mocks.records, ACCESS_ENTRY) == []


# -- the network ---------------------------------------------------------------------------------


@pytest.mark.parametrize("tier", ["private", "public"])
def test_nodes_reach_out_through_a_nat_gateway_or_public_ips(
    mocks: RecordingMocks, tier: Literal["private", "public"]
) -> None:
    """Private nodes: one NAT gateway, in the node zone's public subnet, and no public IPs.
    Public nodes: no NAT gateway, and the public subnets give their instances public IPs."""
    network, _ = deploy(mocks, tier)
    node_subnet = subnet_in(mocks.records, tier, NODE_ZONE)
    public_node = subnet_in(mocks.records, "public", NODE_ZONE)
    group = one(mocks.records, NODE_GROUP)
    private_rt = next(r for r in by_type(mocks.records, ROUTE_TABLE) if r.name == "net-private-rt")

    assert group.inputs["subnetIds"] == [node_subnet.resource_id], group.urn
    assert resolve(network.node_subnet_id) == node_subnet.resource_id, node_subnet.urn
    if tier == "private":
        nat = one(mocks.records, NAT)
        eip = one(mocks.records, EIP)
        assert nat.inputs["subnetId"] == public_node.resource_id, nat.urn
        assert nat.inputs["allocationId"] == eip.resource_id, nat.urn
        assert eip.inputs["domain"] == "vpc", eip.urn
        assert private_rt.inputs["routes"] == [
            {"cidrBlock": "0.0.0.0/0", "natGatewayId": nat.resource_id}
        ], private_rt.urn
    else:
        assert by_type(mocks.records, NAT) == [], [r.urn for r in by_type(mocks.records, NAT)]
        assert by_type(mocks.records, EIP) == [], [r.urn for r in by_type(mocks.records, EIP)]
        assert not private_rt.inputs.get("routes"), private_rt.urn
    for subnet in by_type(mocks.records, SUBNET):
        public = tier == "public" and subnet.name.startswith("net-public-")
        assert subnet.inputs["mapPublicIpOnLaunch"] is public, subnet.urn


def test_subnets_are_the_first_four_20s_tagged_routed_and_two_zoned_for_the_control_plane(
    mocks: RecordingMocks,
) -> None:
    network, _ = deploy(mocks)
    vpc = one(mocks.records, VPC)
    public = [subnet_in(mocks.records, "public", z) for z in (NODE_ZONE, SECOND_ZONE)]
    private = [subnet_in(mocks.records, "private", z) for z in (NODE_ZONE, SECOND_ZONE)]
    assert vpc.inputs["enableDnsHostnames"] is True, vpc.urn
    assert vpc.inputs["enableDnsSupport"] is True, vpc.urn
    for subnet in public:
        assert subnet.inputs["tags"]["kubernetes.io/role/elb"] == "1", subnet.urn
    for subnet in private:
        assert subnet.inputs["tags"]["kubernetes.io/role/internal-elb"] == "1", subnet.urn
    assert resolve(network.public_subnet_ids) == [s.resource_id for s in public], vpc.urn
    assert resolve(network.vpc_id) == vpc.resource_id, vpc.urn
    eks_cluster = one(mocks.records, EKS_CLUSTER)
    subnet_ids = eks_cluster.inputs["subnetIds"]
    zones = {subnet_by_id(mocks.records, s).inputs["availabilityZone"] for s in subnet_ids}
    assert len(subnet_ids) == 2, eks_cluster.urn
    assert zones == {NODE_ZONE, SECOND_ZONE}, eks_cluster.urn
    assert resolve(network.control_plane_subnet_ids) == subnet_ids, eks_cluster.urn
    cidrs = {r.name: r.inputs["cidrBlock"] for r in by_type(mocks.records, SUBNET)}
    assert cidrs == {
        f"net-public-{NODE_ZONE}": "10.42.0.0/20",
        f"net-public-{SECOND_ZONE}": "10.42.16.0/20",
        f"net-private-{NODE_ZONE}": "10.42.32.0/20",
        f"net-private-{SECOND_ZONE}": "10.42.48.0/20",
    }, [r.urn for r in by_type(mocks.records, SUBNET)]
    associated = {r.inputs["subnetId"] for r in by_type(mocks.records, ASSOCIATION)}
    for subnet in by_type(mocks.records, SUBNET):
        assert subnet.resource_id in associated, subnet.urn


# -- outputs, provider, parenting ----------------------------------------------------------------


def test_outputs_come_from_the_eks_components_and_the_kubeconfig_is_secret(
    mocks: RecordingMocks,
) -> None:
    _, cluster = deploy(mocks)
    eks_cluster = one(mocks.records, EKS_CLUSTER)
    provider = one(mocks.records, K8S_PROVIDER)

    assert is_secret(cluster.kubeconfig), eks_cluster.urn
    assert resolve(cluster.kubeconfig) == eks_cluster.outputs["kubeconfigJson"], eks_cluster.urn
    assert provider.inputs["kubeconfig"] == eks_cluster.outputs["kubeconfigJson"], provider.urn
    # Provider inputs cross the wire JSON-encoded, so the flag arrives as a string.
    assert provider.inputs["enableServerSideApply"] == "true", provider.urn
    assert resolve(cluster.provider.urn) == provider.urn, provider.urn
    # The other outputs come from the EKS components too.
    group = one(mocks.records, NODE_GROUP)
    eks_state = mocks.monitor.resources[eks_cluster.outputs["eksCluster"]["urn"]].state
    group_state = mocks.monitor.resources[group.outputs["nodeGroup"]["urn"]].state

    assert resolve(cluster.cluster_name) == eks_state["name"], eks_cluster.urn
    assert resolve(cluster.node_group_name) == group_state["nodeGroupName"], group.urn


def test_every_child_is_parented_to_its_component_and_named_after_it(
    mocks: RecordingMocks,
) -> None:
    deploy(mocks)
    components = {
        r.urn: r for r in mocks.records if r.type_ in (NETWORK_COMPONENT, CLUSTER_COMPONENT)
    }
    # The bootstrap's roles are read beside the components, as the program reads them.
    reads = {named(mocks.records, ROLE, n).urn for n in (NODE_ROLE, SERVICE_ROLE)}
    children = [r for r in mocks.records if r.urn not in components and r.urn not in reads]

    assert len(components) == 2, list(components)
    assert children, "no children were registered"
    for child in children:
        assert child.parent in components, f"{child.urn} has parent {child.parent}"
        assert child.name.startswith(f"{components[child.parent].name}-"), child.urn
    # The only invoke is the partition lookup.
    assert {c.token for c in mocks.calls} == {"aws:index/getPartition:getPartition"}, mocks.calls


# -- validation ----------------------------------------------------------------------------------


def network_args(**overrides: str) -> NetworkArgs:
    values = {
        "cidr_block": CIDR,
        "node_zone": NODE_ZONE,
        "second_zone": SECOND_ZONE,
        "node_subnets": "private",
        **overrides,
    }
    return NetworkArgs(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"cidr_block": "10.42.0.0/20"},
            "`cidr_block` 10.42.0.0/20 is too small: the network needs four /20 subnets (public "
            "and private in two zones), so its prefix must be /18 or shorter; "
            'use e.g. "10.42.0.0/16"',
        ),
        (
            {"cidr_block": "10.0.0.0/8"},
            "`cidr_block` 10.0.0.0/8 is too large: AWS allows VPC prefixes from /16 to /28; "
            'use a /16 inside it, e.g. "10.0.0.0/16"',
        ),
        (
            {"cidr_block": "8.8.0.0/16"},
            "`cidr_block` 8.8.0.0/16 is not a private (RFC 1918) range; use one inside "
            '10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16, e.g. "10.42.0.0/16"',
        ),
        (
            {"cidr_block": "10.42.0.1/16"},
            "`cidr_block` '10.42.0.1/16' is not a valid IPv4 network (10.42.0.1/16 has host bits "
            'set); write it as a network address with a prefix, e.g. "10.42.0.0/16"',
        ),
        (
            {"second_zone": NODE_ZONE},
            f"`node_zone` and `second_zone` are both {NODE_ZONE}, but EKS needs control-plane "
            "subnets in two availability zones; choose a different `second_zone`",
        ),
        (
            {"node_subnets": "hybrid"},
            '`node_subnets` is \'hybrid\'; use "private" or "public"',
        ),
    ],
    ids=["too-small", "too-large", "not-private", "host-bits", "same-zone", "bad-node-subnets"],
)
def test_network_args_reject_bad_values(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        network_args(**overrides)
    assert str(excinfo.value) == message


def cluster_args(**overrides: Any) -> ClusterArgs:
    values: dict[str, Any] = {
        "name": "gemma-graviton-dev",
        "vpc_id": "vpc-1",
        "control_plane_subnet_ids": ["subnet-1", "subnet-2"],
        "node_subnet_id": "subnet-1",
        "kubernetes_version": "1.34",
        "instance_type": INSTANCE_TYPE,
        "node_count": NODE_COUNT,
        "node_disk_gib": DISK_GIB,
        "node_labels": LABELS,
    }
    return ClusterArgs(**{**values, **overrides})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"node_count": 0},
            "`node_count` is 0, but the node group needs at least one node; set it to 1 or more",
        ),
        (
            {"node_disk_gib": 10},
            "`node_disk_gib` is 10, below the 20 GiB the EKS AL2023 AMI needs; "
            "set it to 20 or more",
        ),
    ],
    ids=["empty-node-group", "disk-below-the-ami"],
)
def test_cluster_args_reject_bad_values(overrides: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        cluster_args(**overrides)
    assert str(excinfo.value) == message


def test_an_explicit_aws_provider_reaches_every_aws_child(mocks: RecordingMocks) -> None:
    deploy(mocks, with_aws_provider=True)
    aws_provider = one(mocks.records, "pulumi:providers:aws")
    reference = f"{aws_provider.urn}::{aws_provider.resource_id}"

    for record in mocks.records:
        if record.type_.startswith("aws:"):
            assert record.provider == reference, record.urn
        if record.type_ in (EKS_CLUSTER, NODE_GROUP):
            assert record.providers.get("aws") == reference, record.urn
    for call in mocks.calls:
        assert call.provider == reference, call.token
