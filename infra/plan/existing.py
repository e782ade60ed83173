"""A cluster the stack does not own (`existingCluster`): what the program reads of it, the checks
it must pass before anything is created, the add-ons the stack creates in it, and what is
assumed without a check.

Pure: the program asks AWS (`infra.adapters.existing_cluster`) and hands the answers here, so a
cluster the plan cannot use ends the program with one line before the node group exists, and
tests feed the same functions plain values.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from infra.plan import addons, catalog, readiness
from infra.plan.config import ConfigError, StackConfig
from infra.plan.sizing import Plan
from infra.plan.zones import Zone

#: What the program reads, each with the call that answers it (the planner prints them).
READS = (
    "the cluster (eks:DescribeCluster): Kubernetes version, authentication mode (access "
    "entries, API or API_AND_CONFIG_MAP), endpoint and who may reach it (a private one, or "
    "public CIDRs that leave some runners out, is warned of), certificate, OIDC issuer, cluster "
    "security group, VPC and subnets",
    "its subnets (ec2:DescribeSubnets; for the planned zone's, ec2:DescribeRouteTables and "
    "ec2:DescribeNatGateways): zone, free addresses, whether they map public addresses on "
    "launch and where their default route goes (the nodes go into a private one with a way out)",
    "the stack's own nodes in the nodes' subnet (ec2:DescribeInstances, "
    "ec2:DescribeNetworkInterfaces): the addresses they hold count as room for the plan",
    "its add-ons (eks:DescribeAddon): vpc-cni with network policy, eks-pod-identity-agent, "
    "aws-ebs-csi-driver (required with `modelCache: volume`), amazon-cloudwatch-observability "
    "(required with `monitoring`; without it no log of the model is kept, and vLLM's start-up "
    "errors die with the pods); the stack installs neither of the last two in the cluster",
    "the zones that offer `instanceType` (ec2:DescribeInstanceTypeOfferings)",
    "the stack's collector role (iam:GetRole): that the bootstrap fenced the stack to this cluster",
    "with `lwsInstalled`: the CRD leaderworkersets.leaderworkerset.x-k8s.io, whose v1 schema "
    "must hold every field the groups set",
)
#: What the program relies on and cannot check without rights or reads it does not have.
ASSUMES = (
    "whoever runs `pulumi up` has a cluster-admin access entry in the cluster (the cluster's "
    "owner gives it; the stack creates no access entry)",
    "CoreDNS runs on the cluster's own nodes, which have room for the LWS controller and its "
    "gate Job too (the model nodes' taint keeps them off those)",
    "the private node subnet reaches the internet (a NAT gateway) for the image and "
    "weight downloads, and the cluster's subnets for load balancers carry kubernetes.io/role/elb "
    "or kubernetes.io/role/internal-elb",
    "the model nodes' NoSchedule taint gemma-graviton.dev/stack=<stack> keeps every pod off them "
    "but the stack's ranks, quantize Job and metrics collector, and the DaemonSets that tolerate "
    "every taint (the EKS add-ons' aws-node, kube-proxy, eks-pod-identity-agent, ebs-csi-node, "
    "CloudWatch agent and Fluent Bit do, and are counted); a DaemonSet of the owner's that "
    "tolerates every taint runs there too, uncounted, within the node's headroom",
)


@dataclass(frozen=True)
class ClusterFacts:
    """What the program reads of the cluster (aws.eks.get_cluster)."""

    name: str
    version: str
    endpoint: str
    #: Base64 PEM of the cluster's certificate authority.
    certificate: str
    #: The OIDC issuer URL; the stack uses EKS Pod Identity, so it is reported, never needed.
    oidc_issuer: str | None
    security_group: str
    vpc_id: str
    subnet_ids: tuple[str, ...]
    #: The account the cluster is in (its ARN's): the stack's own.
    account: str
    #: Who reaches the Kubernetes API from outside the VPC: nobody (None: a private endpoint)
    #: or the endpoint's allowed CIDRs.
    public_cidrs: tuple[str, ...] | None = ("0.0.0.0/0",)
    #: How the cluster authenticates (`accessConfig.authenticationMode`): CONFIG_MAP, API or
    #: API_AND_CONFIG_MAP.
    authentication_mode: str = "API_AND_CONFIG_MAP"


@dataclass(frozen=True)
class SubnetFacts:
    """One subnet as EC2 describes it (aws.ec2.get_subnet)."""

    subnet_id: str
    vpc_id: str
    zone: str
    zone_id: str
    free_addresses: int
    #: It maps a public address to what launches in it (`MapPublicIpOnLaunch`): a public
    #: subnet, where nodes get public addresses or, without them, no way out.
    public: bool = False
    #: Where its default route (0.0.0.0/0) goes, in its own route table or else the VPC's main
    #: one: `INTERNET` (an internet gateway: a public subnet), `ELSEWHERE` (an available public
    #: NAT gateway, a transit gateway, an appliance: the way out of a private subnet), `NONE`,
    #: `DEAD_NAT` or `UNKNOWN` (no table this account can read). Read for the planned zone's
    #: subnets and the named one only.
    default_route: str = "elsewhere"


INTERNET, ELSEWHERE, NONE, UNKNOWN = "internet", "elsewhere", "", "unknown"
#: A NAT gateway gone (not found, deleted, failed: the route outlives it, a blackhole), or one
#: that is not yet or not a public way out (pending, private: onward routes it may have are not
#: read).
DEAD_NAT, OTHER_NAT = "dead-nat", "other-nat"
#: Why nodes in a subnet whose default route goes there may have no way out.
_NO_WAY_OUT = {
    INTERNET: "routes 0.0.0.0/0 to an internet gateway but maps no public address, so its nodes "
    "have no way out",
    NONE: "has no default route (0.0.0.0/0) listed in its route table",
    DEAD_NAT: "routes 0.0.0.0/0 to a NAT gateway that is gone (deleted or failed)",
    OTHER_NAT: "routes 0.0.0.0/0 to a NAT gateway that is not an available public one",
    UNKNOWN: "has no route table this account owns (a VPC another account shares)",
}


def no_way_out(subnet: SubnetFacts) -> str | None:
    """Why nodes in `subnet` could not pull the images or download the weights, or None."""
    if subnet.public:
        return "maps public addresses on launch (a public subnet)"
    return _NO_WAY_OUT.get(subnet.default_route)


def check_access(cluster: ClusterFacts) -> None:
    """The cluster takes access entries: the owner gives whoever runs `pulumi up` one (ASSUMES),
    and EKS gives the node role one when the node group is created. A CONFIG_MAP cluster has
    none (EKS user guide, "Grant IAM users access to Kubernetes with EKS access entries": they
    need API or API_AND_CONFIG_MAP), and its aws-auth ConfigMap maps no role ARN with a path
    ("Grant IAM users and roles access to Kubernetes APIs", aws-auth: "the role ARN can't
    include a path"), which every role of the stack has (`infra.plan.iam.role_path`)."""
    if cluster.authentication_mode != "CONFIG_MAP":
        return
    raise ConfigError(
        "existingCluster",
        f"{cluster.name} authenticates with the aws-auth ConfigMap only (CONFIG_MAP), which takes "
        "no access entry and no role with an IAM path such as the stack's node role",
        f"have its owner run `aws eks update-cluster-config --name {cluster.name} "
        "--access-config authenticationMode=API_AND_CONFIG_MAP`",
    )


def check_version(cfg: StackConfig, cluster: ClusterFacts) -> None:
    """The plan's add-on pins, autoscaler tag and support dates are `kubernetesVersion`'s: it
    must be the cluster's, and one the plan pins."""
    if cluster.version == cfg.kubernetes_version:
        return
    supported = sorted(addons.ADDON_VERSIONS, key=lambda v: int(v.split(".")[1]))
    if cluster.version not in addons.ADDON_VERSIONS:
        raise ConfigError(
            "existingCluster",
            f"{cluster.name} runs Kubernetes {cluster.version}, which the plan does not support "
            f"({', '.join(supported)})",
            f"upgrade the cluster to {supported[-1]}, or deploy into another cluster",
        )
    raise ConfigError(
        "kubernetesVersion",
        f"is {cfg.kubernetes_version}, but `existingCluster` {cluster.name} runs {cluster.version}",
        f'set `kubernetesVersion` to "{cluster.version}"',
    )


def addresses_per_node(instance_type: str, custom_networking: bool = False) -> int:
    """VPC addresses one node may take in its subnet: every pod address its interfaces can hold
    plus the node's own. Modelled from eni-max-pods (interfaces x (addresses per interface - 1)
    + 2, `catalog.InstanceType.max_pods`): the VPC CNI's warm interface can fill an interface
    more, so this is max_pods + 2, the count for four interfaces and within one address of it
    for three. Under custom networking the node's own address alone: pods never use the primary
    interface, and every other interface is made in the ENIConfig's subnet (amazon-vpc-cni-k8s
    pkg/ipamd/datastore/data_store.go `GetAllocatableENIs`, pkg/ipamd/ipamd.go)."""
    return 1 if custom_networking else catalog.INSTANCE_TYPES[instance_type].max_pods + 2


def addresses_needed(plan: Plan, custom_networking: bool = False) -> int:
    """Addresses the node group may take at its largest (a rollout's surge nodes included)."""
    each = addresses_per_node(plan.instance_type, custom_networking)
    return (plan.nodes + plan.rollout.surge_nodes) * each


def node_subnet(
    cfg: StackConfig,
    plan: Plan,
    zone_id: str,
    cluster: ClusterFacts,
    subnets: Sequence[SubnetFacts],
) -> SubnetFacts:
    """The model nodes' subnet: `existingClusterSubnet`, or the cluster's one private subnet in
    the planned zone; in the planned zone and in the cluster's VPC (its room is `check_room`'s).
    Never one picked by what changes between runs (free addresses): a node group's `subnet_ids`
    is ForceNew (terraform-provider-aws internal/service/eks/node_group.go), so another pick
    on a later `up` would replace the node group and take the model down."""
    if cfg.existing_cluster_subnet is not None:
        (chosen,) = [s for s in subnets if s.subnet_id == cfg.existing_cluster_subnet]
        if chosen.vpc_id != cluster.vpc_id:
            raise ConfigError(
                "existingClusterSubnet",
                f"{chosen.subnet_id} is in {chosen.vpc_id}, not in {cluster.name}'s VPC "
                f"{cluster.vpc_id}",
                "choose a subnet of the cluster's VPC",
            )
        if chosen.zone_id != zone_id:
            raise ConfigError(
                "existingClusterSubnet",
                f"{chosen.subnet_id} is in {chosen.zone} ({chosen.zone_id}), not in the planned "
                f"zone {cfg.availability_zone}",
                f"choose a subnet in {cfg.availability_zone}, or set `availabilityZone` to "
                f"{chosen.zone}",
            )
        # An internet gateway is a way out only for nodes with public addresses, and a NAT
        # gateway that is gone is none. A named subnet whose way out is not in sight is taken: a
        # route the data source leaves out (one a VPN gateway propagates, one to another
        # account's interface), or one beyond a private NAT gateway, may be its way out.
        if not chosen.public and chosen.default_route in (INTERNET, DEAD_NAT):
            raise ConfigError(
                "existingClusterSubnet",
                f"{chosen.subnet_id} {no_way_out(chosen)}",
                "choose a private subnet whose route table sends 0.0.0.0/0 to a NAT gateway",
            )
        return chosen
    in_zone = [s for s in subnets if s.zone_id == zone_id]
    if not in_zone:
        zones = ", ".join(sorted({s.zone for s in subnets})) or "none"
        raise ConfigError(
            "existingCluster",
            f"{cluster.name} has no subnet in the planned zone {cfg.availability_zone} "
            f"(its zones: {zones})",
            "set `availabilityZone` to one of its zones, or give a subnet of that zone in "
            "`existingClusterSubnet`",
        )
    private = [s for s in in_zone if no_way_out(s) is None]
    if not private:
        skipped = "; ".join(f"{s.subnet_id} {no_way_out(s)}" for s in in_zone)
        raise ConfigError(
            "existingClusterSubnet",
            f"is needed: none of {cluster.name}'s subnets in {cfg.availability_zone} is a "
            f"private one with a way out ({skipped})",
            f"give a private subnet of {cfg.availability_zone} in the cluster's VPC (a route "
            "to a NAT gateway)",
        )
    if len(private) > 1:
        listed = ", ".join(f"{s.subnet_id} ({s.free_addresses} free)" for s in private)
        raise ConfigError(
            "existingClusterSubnet",
            f"is needed: {cluster.name} has {len(private)} private subnets with a way out in "
            f"{cfg.availability_zone} ({listed}), and the nodes' subnet cannot change without "
            "replacing the node group",
            "set it to one of them; for a deployed stack, the one its node group uses (`aws eks "
            "describe-nodegroup` of its eks-nodes-* group, `nodegroup.subnets`)",
        )
    return private[0]


#: The nodes a managed node group's update launches beside the old ones before it drains them
#: (`readiness.SURGE_NODES`): a new launch template or Kubernetes version is such an update.
UPDATE_SURGE_NODES = readiness.SURGE_NODES


def check_room(
    cfg: StackConfig,
    plan: Plan,
    subnet: SubnetFacts,
    held: int = 0,
    present: Mapping[str, str] | None = None,
) -> str | None:
    """The nodes' subnet has room for the node group at its largest. `held`: the addresses the
    stack's own nodes of the planned type hold there already (read on every `up`), which the
    subnet's free count leaves out but the plan's need counts; so a running stack is not
    refused for its own. Nodes of another type are not counted: a new type is a new node group,
    made before the old one goes. Read as each interface's private addresses; a VPC CNI that
    delegates prefixes is not modelled here, nor the ENIConfig's subnet a VPC CNI with custom
    networking gives pods (`cni_warnings`). `present`: the add-ons read (`CHECKED_ADDONS`).

    Returns a warning where nodes run and the free addresses alone may not hold an update's new
    nodes and their pods (`UPDATE_SURGE_NODES`, each at its modelled most): said, not refused,
    as most `up`s change no node (a key rotation)."""
    custom = custom_networking(present or {})
    need = addresses_needed(plan, custom)
    each = addresses_per_node(plan.instance_type, custom)
    own = f" (and {held} its own nodes hold)" if held else ""
    if subnet.free_addresses + held < need:
        raise ConfigError(
            "existingClusterSubnet" if cfg.existing_cluster_subnet else "existingCluster",
            f"{subnet.subnet_id} has {subnet.free_addresses} free addresses{own}, but "
            f"{plan.nodes + plan.rollout.surge_nodes} x {plan.instance_type} may take {need} "
            f"({each} each, modelled)",
            "give a subnet with room in `existingClusterSubnet`, or free addresses in it",
        )
    surge = UPDATE_SURGE_NODES * each
    if held and subnet.free_addresses < surge:
        return (
            f"{subnet.subnet_id} has {subnet.free_addresses} free addresses, but an update of the "
            f"node group (a new launch template or Kubernetes version) launches up to "
            f"{UPDATE_SURGE_NODES} x {plan.instance_type} beside the running nodes, which may take "
            f"{surge} addresses (modelled, at most): free addresses in it before such an update"
        )
    return None


def _values(configuration: str) -> dict[str, Any]:
    """The vpc-cni add-on's configuration values, JSON or YAML (EKS API `CreateAddon`,
    `configurationValues`): JSON first, as YAML refuses the tabs JSON may be indented with;
    empty where they are neither, or no mapping."""
    try:
        values = json.loads(configuration or "{}")
    except json.JSONDecodeError:
        try:
            values = yaml.safe_load(configuration)
        except yaml.YAMLError:
            return {}
    return values if isinstance(values, dict) else {}


def _network_policy_on(configuration: str) -> bool:
    """Whether the vpc-cni add-on's configuration values turn its policy agent on (the
    add-on's schema takes `enableNetworkPolicy` as the text "true")."""
    return str(_values(configuration).get("enableNetworkPolicy")).lower() == "true"


CUSTOM_NETWORKING = "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG"
PREFIX_DELEGATION = "ENABLE_PREFIX_DELEGATION"
#: Security groups for pods: the resource controller's trunk and branch interfaces then go into
#: the node subnet whenever ipamd records no custom networking for the node, as with the
#: ENIConfig `default` (amazon-vpc-cni-k8s v1.23.1 pkg/ipamd/ipamd.go; amazon-vpc-resource-
#: controller-k8s pkg/node/manager/manager.go), so the node subnet is counted in full.
POD_ENI = "ENABLE_POD_ENI"
#: Go's `strconv.ParseBool` true, as the CNI reads its flags (utils/utils.go, ipamd.go).
GO_TRUE = ("1", "t", "T", "true", "TRUE", "True")
#: `ENI_CONFIG_LABEL_DEF`'s default: a label the stack's nodes never carry.
ENI_CONFIG_LABEL = "k8s.amazonaws.com/eniConfig"


def _cni_env(present: Mapping[str, str]) -> dict[str, Any]:
    env = _values(present.get(addons.VPC_CNI, "")).get("env")
    return env if isinstance(env, dict) else {}


def _on(env: Mapping[str, Any], flag: str) -> bool:
    """Whether the CNI reads `flag` as true (`GO_TRUE`)."""
    return str(env.get(flag)) in GO_TRUE


def custom_networking(present: Mapping[str, str]) -> bool:
    """Whether the node subnet holds each node's own address alone: custom networking on
    (`addresses_per_node`), without security groups for pods (`POD_ENI`)."""
    env = _cni_env(present)
    return _on(env, CUSTOM_NETWORKING) and not _on(env, POD_ENI)


def _eni_config(label: str | None, zone: Zone) -> str:
    """The ENIConfig the stack's nodes select (amazon-vpc-cni-k8s v1.23.1
    pkg/eniconfig/eniconfig.go `GetNodeSpecificENIConfigName`: the value of the node label
    `ENI_CONFIG_LABEL_DEF` names, else `default`; the `vpc.amazonaws.com/externalEniConfig`
    label and the `ENI_CONFIG_ANNOTATION_DEF` annotation it reads first the stack's nodes do not
    carry)."""
    named = {
        "topology.kubernetes.io/zone": zone.name,
        "failure-domain.beta.kubernetes.io/zone": zone.name,
        "topology.k8s.aws/zone-id": zone.zone_id,
    }
    if label in named:
        return f"the ENIConfig named {named[label]}"
    if not label or label == ENI_CONFIG_LABEL:  # the CNI reads an empty one as its default
        return "the ENIConfig named default"
    return f"the ENIConfig their label {label} names"


def cni_warnings(present: Mapping[str, str], zone: Zone) -> list[str]:
    """What the room check cannot count (the program warns with it), read from the vpc-cni
    add-on's configuration values only (an `aws-node` DaemonSet edited by hand is not seen): a
    CNI that delegates /28 prefixes takes 16 addresses at a time, and one with custom networking
    gives pods addresses from the subnet of the ENIConfig a node selects (`_eni_config`),
    without which aws-node never turns the node Ready (since v1.13.0)."""
    env = _cni_env(present)
    cni = f"the cluster's {addons.VPC_CNI}"
    custom = _on(env, CUSTOM_NETWORKING)
    eni_config = _eni_config(env.get("ENI_CONFIG_LABEL_DEF"), zone)
    warnings = []
    if _on(env, PREFIX_DELEGATION):
        subnet = f"{eni_config}'s subnet" if custom else "the node subnet"
        warnings.append(
            f"{cni} delegates prefixes ({PREFIX_DELEGATION}): its nodes take /28 blocks of 16 "
            f"addresses, which the subnet room check does not count; check that {subnet} has "
            "free /28 blocks for every node"
        )
    if custom:
        warnings.append(
            f"{cni} uses custom networking ({CUSTOM_NETWORKING}): the stack's nodes select "
            f"{eni_config} and take their pods' addresses from its subnet, which the room check "
            "does not read; check that it exists (without it the nodes never turn Ready) with a "
            f"subnet in {zone.name} that has room for every node's interfaces but the first"
        )
    return warnings


#: The add-ons the stack reads; `owned_addons` says which it creates.
CHECKED_ADDONS = (addons.VPC_CNI, addons.IDENTITY_AGENT, addons.EBS_CSI, addons.CLOUDWATCH)


def owned_addons(
    cfg: StackConfig, plan: Plan, present: Mapping[str, str], ours: Collection[str] = ()
) -> tuple[str, ...]:
    """The add-ons the stack creates in the cluster, or keeps (and deletes on destroy): the Pod
    Identity agent for the collector where the cluster has none, which the stack then leaves to
    the cluster (it is never deleted: `components.existing_cluster`, so a later `up` that
    declared it again would fail to create what runs), and whatever else the stack made already
    (`ours`: the add-ons carrying its own `project` and `stack` tags), which its next `up` must
    keep registering or it would delete them; ownership is never read from presence, since what
    the stack made is present on its next read. `present` maps each add-on the
    cluster runs to its configuration values. The VPC CNI is the cluster's network, never the
    stack's: it must run with its policy agent, or the model's NetworkPolicy would be accepted
    and ignored; the EBS CSI driver and CloudWatch add-on are the owner's too, required where a
    layer needs them (a stack deployed before that rule keeps the ones it made)."""
    name = cfg.existing_cluster
    enable = (
        f"aws eks update-addon --cluster-name {name} --addon-name vpc-cni "
        """--configuration-values '{"enableNetworkPolicy":"true"}'"""
    )
    if addons.VPC_CNI not in present:
        raise ConfigError(
            "existingCluster",
            f"{name} runs no vpc-cni add-on, whose policy agent enforces the model's NetworkPolicy",
            f"have its owner install it with network policy on (`aws eks create-addon` with the "
            f"values of `{enable}`)",
        )
    if not _network_policy_on(present[addons.VPC_CNI]):
        raise ConfigError(
            "existingCluster",
            f"{name}'s vpc-cni add-on runs without network policy, so the model's "
            "NetworkPolicy would be accepted and ignored",
            f"have its owner run `{enable}`",
        )
    # The EBS CSI driver and the CloudWatch add-on are cluster-wide (DaemonSets on every node,
    # every namespace's volumes and logs) and their Pod Identity associations would take a
    # self-managed agent's credentials: the stack never installs them here, nor the
    # /aws/containerinsights/<cluster>/* log groups, which its destroy would delete.
    if plan.model_cache == "volume" and addons.EBS_CSI not in present:
        raise ConfigError(
            "modelCache",
            f"is volume, but `existingCluster` {name} runs no {addons.EBS_CSI} add-on to "
            "provision the volumes, and the stack installs none in a cluster it does not own",
            f"have its owner install {addons.EBS_CSI}, or set `modelCache` to none",
        )
    if cfg.monitoring and addons.CLOUDWATCH not in present:
        raise ConfigError(
            "monitoring",
            f"counts answers in the logs {name}'s {addons.CLOUDWATCH} add-on ships, but it runs "
            "none, and the stack installs none in a cluster it does not own",
            f"have its owner install {addons.CLOUDWATCH}, or set `monitoring` to false",
        )
    if addons.EBS_CSI in ours and plan.model_cache != "volume":
        # The driver is registered with the volumes only: without them this `up` would delete
        # it, and every volume it serves in the cluster with it.
        raise ConfigError(
            "modelCache",
            f"is {plan.model_cache}, but the stack installed {addons.EBS_CSI} in {name} with "
            "its volumes, and without them would delete the driver every team's volumes use",
            "keep `modelCache: volume`, or hand the driver to the cluster's owner first "
            "(`pulumi state delete` its add-on and its Pod Identity association)",
        )
    owned = [a for a in (addons.CLOUDWATCH, addons.EBS_CSI) if a in ours]
    # The collector and the add-ons the stack keeps get their roles through Pod Identity.
    if (cfg.monitoring or owned) and addons.IDENTITY_AGENT not in present:
        owned.append(addons.IDENTITY_AGENT)
    return tuple(owned)


def logs_warning(cfg: StackConfig, present: Mapping[str, str]) -> str | None:
    """What a cluster without the CloudWatch add-on costs (the program warns with it)."""
    if addons.CLOUDWATCH in present:
        return None
    return (
        f"`existingCluster` {cfg.existing_cluster} runs no {addons.CLOUDWATCH} add-on, so no "
        "log of the model is kept: vLLM's start-up errors die with the pods LWS deletes; have "
        f"its owner install {addons.CLOUDWATCH} (the stack installs none in a cluster it does "
        "not own)"
    )


def endpoint_warning(cluster: ClusterFacts) -> str | None:
    """Where `pulumi up` must run to reach the cluster's Kubernetes API (the program warns with
    it): a run from elsewhere creates the node group, then fails at the first Kubernetes object
    after minutes of waiting. Not refused: a runner inside the VPC, or at an allowed address,
    reaches it, and the program cannot tell where it runs."""
    if cluster.public_cidrs is None:
        return (
            f"`existingCluster` {cluster.name}: its Kubernetes API endpoint is private, so "
            "`pulumi up` must run inside its VPC or a network peered with it (a self-hosted CI "
            "runner there can; GitHub's hosted runners cannot)"
        )
    if "0.0.0.0/0" in cluster.public_cidrs:
        return None
    return (
        f"`existingCluster` {cluster.name}: its public endpoint admits only "
        f"{', '.join(cluster.public_cidrs)}; run `pulumi up` from there or inside its VPC"
    )


def check_fence(cfg: StackConfig, stack: str, trust_policy: str) -> None:
    """The bootstrap fenced the stack to `existingCluster`: its pod roles' trust names the
    cluster's ARN, and the same bootstrap run fenced the deploy role's EKS writes (node groups,
    add-ons, associations) to it. Read from the collector's role, which every stack has: the
    deploy role cannot read itself (the bootstrap denies it every IAM action on the CI's own
    roles), so its rights are known by the run that made both."""
    document = json.loads(trust_policy)
    named = {
        str(arn).rsplit("/", 1)[-1]
        for statement in document.get("Statement", [])
        for arn in [
            statement.get("Condition", {})
            .get("StringEquals", {})
            .get("aws:RequestTag/eks-cluster-arn", "")
        ]
    }
    if cfg.existing_cluster not in named:
        fenced = ", ".join(sorted(n for n in named if n)) or "no cluster"
        raise ConfigError(
            "existingCluster",
            f"{cfg.existing_cluster} is not the cluster the bootstrap fenced the {stack} "
            f"stack's roles and deploy role to ({fenced})",
            f"run the bootstrap's `pulumi up` again with `existingCluster` in "
            f"stacks/Pulumi.{stack}.yaml",
        )
