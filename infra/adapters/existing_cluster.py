"""The existing-cluster layer's wiring (`existingCluster`): the program's reads of a cluster it
does not own, the checks they feed (`infra.plan.existing`), all before the first resource is
registered, and the stack's `ExistingCluster` in it. The program imports it only for such a
stack.

Each read is a data source (a synchronous invoke), so `pulumi preview` makes them too and a
cluster the plan cannot use creates nothing.
"""

from __future__ import annotations

from dataclasses import replace

import pulumi
import pulumi_aws as aws

from components.existing_cluster import ExistingCluster, ExistingClusterArgs
from components.manifests.identity import role_name
from components.manifests.spec import Manifest, stack_taint
from infra.adapters.wiring import NODE_LABELS
from infra.plan import addons, existing, zones
from infra.plan.config import ConfigError, StackConfig
from infra.plan.sizing import Plan

#: What terraform-provider-aws's data sources say of a missing object: the EKS finders
#: (internal/service/eks `findClusterByName`, `findAddonByTwoPartKey`) wrap it in a
#: `retry.NotFoundError`, whose text is "couldn't find resource" alone (the marker that matches
#: a missing cluster or add-on; ResourceNotFoundException is kept for a read that passes the
#: code through), and the subnet data source says "no matching EC2 Subnet found"
#: (vpc_subnet_data_source.go, `tfresource.SingularDataSourceFindError`). Only these: a
#: denied or throttled read whose text says "not found" must end the program.
_NOT_FOUND = (
    "ResourceNotFoundException",
    "no matching EC2 Subnet found",
    "no matching EC2 NAT Gateway found",
    "no matching EC2 Network Interface found",
    "couldn't find resource",
)


def _missing(error: Exception) -> bool:
    return any(code in str(error) for code in _NOT_FOUND)


def _cluster(name: str, region: str, invoke: pulumi.InvokeOptions) -> existing.ClusterFacts:
    try:
        found = aws.eks.get_cluster(name=name, opts=invoke)
    except Exception as error:
        if not _missing(error):
            raise
        raise ConfigError(
            "existingCluster",
            f"{name} is not an EKS cluster of {region} that this account can see",
            f"check the name with `aws eks list-clusters --region {region}`",
        ) from None
    vpc = found.vpc_config
    oidc = found.identities[0].oidcs[0].issuer if found.identities else None
    # The data source lists no access config where EKS reports none (cluster_data_source.go,
    # `flattenAccessConfigResponse`): a cluster from before access entries, CONFIG_MAP.
    # None or empty where EKS reports no access config: a cluster from before access entries.
    access = (found.access_configs[0].authentication_mode if found.access_configs else "") or (
        "CONFIG_MAP"
    )
    return existing.ClusterFacts(
        name=found.name,
        version=found.version,
        endpoint=found.endpoint,
        certificate=found.certificate_authorities[0].data,
        oidc_issuer=oidc,
        account=found.arn.split(":")[4],
        security_group=vpc.cluster_security_group_id,
        vpc_id=vpc.vpc_id,
        subnet_ids=tuple(vpc.subnet_ids),
        public_cidrs=tuple(vpc.public_access_cidrs) if vpc.endpoint_public_access else None,
        authentication_mode=access,
    )


def _default_route(subnet: str, vpc: str, account: str, invoke: pulumi.InvokeOptions) -> str:
    """Where `subnet`'s 0.0.0.0/0 goes (`existing.SubnetFacts.default_route`): its own route
    table's, else the VPC's main table's (a subnet with no association of its own uses the main
    one: VPC user guide, "Subnet route tables"). The plural data source lists nothing without
    failing; the singular one fails on no match (terraform-provider-aws internal/service/ec2
    vpc_route_tables_data_source.go, vpc_route_table_data_source.go). In a VPC another account
    shares, the tables and NAT gateways are the owner's, and their answers are not read
    (VPC user guide, "Share your VPC")."""

    def tables(name: str, value: str) -> list[str]:
        found = aws.ec2.get_route_tables(
            vpc_id=vpc, filters=[{"name": name, "values": [value]}], opts=invoke
        )
        return list(found.ids or ())

    table = tables("association.subnet-id", subnet) or tables("association.main", "true")
    if not table:
        return existing.UNKNOWN
    found = aws.ec2.get_route_table(route_table_id=table[0], opts=invoke)
    if found.owner_id != account:
        return existing.UNKNOWN
    (route, *_) = [r for r in found.routes if r.cidr_block == "0.0.0.0/0"] or [None]
    if route is None:
        return existing.NONE
    if route.gateway_id.startswith("igw-"):
        return existing.INTERNET
    if not route.nat_gateway_id:
        return existing.ELSEWHERE
    # A NAT gateway is a way out while it is an available public one; the route outlives a
    # deleted one (a blackhole, which the data source does not show).
    try:
        nat = aws.ec2.get_nat_gateway(id=route.nat_gateway_id, opts=invoke)
    except Exception as error:
        if not _missing(error):
            raise
        return existing.DEAD_NAT
    if nat.state in ("deleting", "deleted", "failed"):
        return existing.DEAD_NAT
    usable = nat.state == "available" and nat.connectivity_type == "public"
    return existing.ELSEWHERE if usable else existing.OTHER_NAT


def _subnet(subnet_id: str, invoke: pulumi.InvokeOptions) -> existing.SubnetFacts | None:
    """The subnet, or None where EC2 finds none (deleted, or not shared with this account)."""
    try:
        found = aws.ec2.get_subnet(id=subnet_id, opts=invoke)
    except Exception as error:
        if not _missing(error):
            raise
        return None
    return existing.SubnetFacts(
        subnet_id=found.id,
        vpc_id=found.vpc_id,
        zone=found.availability_zone,
        zone_id=found.availability_zone_id,
        free_addresses=found.available_ip_address_count,
        public=bool(found.map_public_ip_on_launch),
    )


def _held(
    subnet_id: str, instance_type: str, tags: dict[str, str], invoke: pulumi.InvokeOptions
) -> int:
    """Private addresses the stack's own nodes of `instance_type` (its `project` and `stack`
    tags, which the launch template puts on each instance) hold in `subnet_id`: every interface
    attached to them there. Both plural data sources list nothing without failing
    (terraform-provider-aws internal/service/ec2 ec2_instances_data_source.go,
    vpc_network_interfaces_data_source.go); an interface the VPC CNI deletes between the list
    and its read counts nothing (the check only gets stricter)."""
    nodes = aws.ec2.get_instances(
        instance_tags={k: tags[k] for k in ("project", "stack")},
        instance_state_names=["pending", "running"],
        filters=[
            {"name": "subnet-id", "values": [subnet_id]},
            {"name": "instance-type", "values": [instance_type]},
        ],
        opts=invoke,
    )
    if not nodes.ids:
        return 0
    interfaces = aws.ec2.get_network_interfaces(
        filters=[
            {"name": "attachment.instance-id", "values": list(nodes.ids)},
            {"name": "subnet-id", "values": [subnet_id]},
        ],
        opts=invoke,
    )
    return sum(_addresses(i, invoke) for i in interfaces.ids or ())


def _addresses(interface: str, invoke: pulumi.InvokeOptions) -> int:
    try:
        return len(aws.ec2.get_network_interface(id=interface, opts=invoke).private_ips or ())
    except Exception as error:
        if not _missing(error):
            raise
        return 0


def _addons(
    name: str, tags: dict[str, str], invoke: pulumi.InvokeOptions
) -> tuple[dict[str, str], set[str]]:
    """Each add-on of `existing.CHECKED_ADDONS` the cluster runs -> its configuration values,
    and those the stack made itself: they carry its provider's `project` and `stack` tags."""
    present, ours = {}, set()
    for addon in existing.CHECKED_ADDONS:
        try:
            found = aws.eks.get_addon(cluster_name=name, addon_name=addon, opts=invoke)
        except Exception as error:
            if not _missing(error):
                raise
            continue
        present[addon] = found.configuration_values or ""
        if all((found.tags or {}).get(k) == tags[k] for k in ("project", "stack")):
            ours.add(addon)
    return present, ours


def adopt_cluster(
    cfg: StackConfig,
    plan: Plan,
    stack: str,
    node_zone: zones.Zone,
    node_role: pulumi.Input[str],
    instance_tags: dict[str, str],
    addon_versions: dict[str, str],
    provider: aws.Provider,
    lws_group: Manifest | None = None,
) -> tuple[ExistingCluster, tuple[str, ...]]:
    """The stack's nodes in a cluster it does not own, and the add-ons the stack creates there.
    Wired only for a stack with `existingCluster`, which is read first and must pass every check
    of `infra.plan.existing`; a refusal ends the program with one line. The zone's offer of the
    planned type is `place_zones`' check. `lws_group`: the group the cluster's own
    LeaderWorkerSet CRD must hold (`lwsInstalled`), checked before the nodes are made."""
    if cfg.existing_cluster is None:
        raise ValueError("adopt_cluster is for a stack with `existingCluster`")
    invoke = pulumi.InvokeOptions(provider=provider)
    try:
        found = _cluster(cfg.existing_cluster, cfg.region, invoke)
        existing.check_access(found)
        existing.check_version(cfg, found)
        named = cfg.existing_cluster_subnet
        # The named subnet alone, else the cluster's; one EC2 no longer finds takes no nodes.
        read = [_subnet(i, invoke) for i in ([named] if named else found.subnet_ids)]
        if named and read[0] is None:
            raise ConfigError(
                "existingClusterSubnet",
                f"{named} is not a subnet this account can see",
                "use a subnet ID of the cluster's VPC, as `aws ec2 describe-subnets` prints it",
            )
        # Route tables are read for the subnets the nodes may go into only.
        subnets = [
            replace(s, default_route=_default_route(s.subnet_id, s.vpc_id, found.account, invoke))
            if s.zone_id == node_zone.zone_id or s.subnet_id == named
            else s
            for s in read
            if s is not None
        ]
        subnet = existing.node_subnet(cfg, plan, node_zone.zone_id, found, subnets)
        held = _held(subnet.subnet_id, plan.instance_type, instance_tags, invoke)
        present, ours = _addons(found.name, instance_tags, invoke)
        room = existing.check_room(cfg, plan, subnet, held, present)
        owned = existing.owned_addons(cfg, plan, present, ours)
        # A missing role fails its read (`components.stack_roles.existing_roles`) first.
        collector = aws.iam.get_role(name=role_name(stack, "collector"), opts=invoke)
        existing.check_fence(cfg, stack, collector.assume_role_policy)
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None
    warnings = (existing.logs_warning(cfg, present), existing.endpoint_warning(found), room)
    for warning in (*warnings, *existing.cni_warnings(present, node_zone)):
        if warning is not None:
            pulumi.log.warn(warning)
    cluster = ExistingCluster(
        "eks",
        ExistingClusterArgs(
            name=found.name,
            endpoint=found.endpoint,
            certificate_authority=found.certificate,
            region=cfg.region,
            kubernetes_version=found.version,
            node_subnet_id=subnet.subnet_id,
            instance_type=plan.instance_type,
            node_count=plan.nodes,
            node_disk_gib=plan.node_disk_gib,
            node_labels=NODE_LABELS,
            node_role=node_role,
            node_taint=stack_taint(stack),
            surge_nodes=plan.rollout.surge_nodes,
            instance_tags=instance_tags,
            identity_agent_version=addon_versions[addons.IDENTITY_AGENT]
            if addons.IDENTITY_AGENT in owned
            else None,
            lws_group=lws_group,
        ),
        opts=pulumi.ResourceOptions(providers=[provider]),
    )
    return cluster, owned
