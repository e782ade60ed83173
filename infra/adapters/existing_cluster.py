"""The program's reads of a cluster it does not own (`existingCluster`), and the checks they
feed (`infra.plan.existing`), all before the first resource is registered.

Each read is a data source (a synchronous invoke), so `pulumi preview` makes them too and a
cluster the plan cannot use creates nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.manifests.identity import role_name
from infra.plan import existing, zones
from infra.plan.config import ConfigError, StackConfig
from infra.plan.sizing import Plan

#: What terraform-provider-aws's data sources report for a missing object ("couldn't find
#: resource", internal/tfresource; EKS's own ResourceNotFoundException).
_NOT_FOUND = ("couldn't find resource", "ResourceNotFoundException", "not found")


@dataclass(frozen=True)
class ClusterReading:
    """The cluster as read and checked."""

    cluster: existing.ClusterFacts
    #: The model nodes' subnet.
    subnet: existing.SubnetFacts
    #: The add-ons the stack creates (`existing.owned_addons`).
    owned_addons: tuple[str, ...]


def _missing(error: Exception) -> bool:
    text = str(error)
    return any(marker.lower() in text.lower() for marker in _NOT_FOUND)


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
    return existing.ClusterFacts(
        name=found.name,
        version=found.version,
        endpoint=found.endpoint,
        certificate=found.certificate_authorities[0].data,
        oidc_issuer=oidc,
        security_group=vpc.cluster_security_group_id,
        vpc_id=vpc.vpc_id,
        subnet_ids=tuple(vpc.subnet_ids),
    )


def _subnet(subnet_id: str, invoke: pulumi.InvokeOptions) -> existing.SubnetFacts:
    try:
        found = aws.ec2.get_subnet(id=subnet_id, opts=invoke)
    except Exception as error:
        if not _missing(error):
            raise
        raise ConfigError(
            "existingClusterSubnet",
            f"{subnet_id} is not a subnet this account can see",
            "use a subnet ID of the cluster's VPC, as `aws ec2 describe-subnets` prints it",
        ) from None
    return existing.SubnetFacts(
        subnet_id=found.id,
        vpc_id=found.vpc_id,
        zone=found.availability_zone,
        zone_id=found.availability_zone_id,
        free_addresses=found.available_ip_address_count,
    )


def _addons(name: str, invoke: pulumi.InvokeOptions) -> dict[str, str]:
    """Each add-on of `existing.CHECKED_ADDONS` the cluster runs -> its configuration values."""
    present = {}
    for addon in existing.CHECKED_ADDONS:
        try:
            found = aws.eks.get_addon(cluster_name=name, addon_name=addon, opts=invoke)
        except Exception as error:
            if not _missing(error):
                raise
            continue
        present[addon] = found.configuration_values or ""
    return present


def read_cluster(
    cfg: StackConfig, plan: Plan, stack: str, node_zone: zones.Zone, provider: aws.Provider
) -> ClusterReading:
    """Read `existingCluster` and pass every check of `infra.plan.existing`; a refusal ends the
    program with one line. The zone's offer of the planned type is `place_zones`' check."""
    if cfg.existing_cluster is None:
        raise ValueError("read_cluster is for a stack with `existingCluster`")
    invoke = pulumi.InvokeOptions(provider=provider)
    try:
        cluster = _cluster(cfg.existing_cluster, cfg.region, invoke)
        existing.check_version(cfg, cluster)
        ids = list(cluster.subnet_ids)
        if cfg.existing_cluster_subnet and cfg.existing_cluster_subnet not in ids:
            ids.append(cfg.existing_cluster_subnet)
        subnets = [_subnet(subnet_id, invoke) for subnet_id in ids]
        subnet = existing.node_subnet(cfg, plan, node_zone.zone_id, cluster, subnets)
        owned = existing.owned_addons(cfg, plan, _addons(cluster.name, invoke))
        # A missing role fails its read (`components.stack_roles.existing_roles`) first.
        collector = aws.iam.get_role(name=role_name(stack, "collector"), opts=invoke)
        existing.check_fence(cfg, stack, collector.assume_role_policy)
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None
    return ClusterReading(cluster=cluster, subnet=subnet, owned_addons=owned)
