"""Which physical zones a stack's zone keys mean, checked against what the account offers.

Pure: the program asks AWS (`aws.get_availability_zones`, `aws.ec2.get_instance_type_offerings`)
at preview and hands the answers here, so a bad zone ends the program with one line before the
VPC exists, and tests feed the same function plain lists.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from infra.plan import catalog
from infra.plan.config import ConfigError
from infra.plan.config_parts import ZONE_ID


@dataclass(frozen=True)
class Zone:
    """One availability zone of the account: its name here and its stable ID."""

    name: str
    zone_id: str


@dataclass(frozen=True)
class ZonePlacement:
    """The zones the network is built in, as names (what subnets take)."""

    node: Zone
    control_plane: Zone


def _find(key: str, wanted: str, zones: Sequence[Zone], region: str) -> Zone:
    attr = "zone_id" if ZONE_ID.fullmatch(wanted) else "name"
    for zone in zones:
        if getattr(zone, attr) == wanted:
            return zone
    listed = ", ".join(f"{z.name} ({z.zone_id})" for z in zones) or "none"
    raise ConfigError(
        key,
        f"{wanted} is not an available zone of {region} in this account",
        f"use one of: {listed}",
    )


def _eks_accepts(key: str, zone: Zone, zones: Sequence[Zone]) -> None:
    if zone.zone_id in catalog.EKS_UNSUPPORTED_ZONE_IDS:
        others = ", ".join(
            z.name for z in zones if z.zone_id not in catalog.EKS_UNSUPPORTED_ZONE_IDS
        )
        raise ConfigError(
            key,
            f"{zone.name} ({zone.zone_id}) is a zone where EKS refuses control-plane subnets",
            f"choose another zone: {others}",
        )


def place(
    *,
    region: str,
    availability_zone: str,
    control_plane_zone: str,
    instance_type: str,
    zones: Sequence[Zone],
    offered_zone_ids: Collection[str],
) -> ZonePlacement:
    """The node zone and the control plane's second zone, or a `ConfigError` naming the key.

    `zones` are the region's available zones; `offered_zone_ids` are the zone IDs that offer
    `instance_type`. Both subnets of the node zone and of the second zone hold control-plane
    network interfaces, so EKS must accept both.
    """
    node = _find("availabilityZone", availability_zone, zones, region)
    if node.zone_id not in offered_zone_ids:
        offering = ", ".join(z.name for z in zones if z.zone_id in offered_zone_ids) or "none"
        raise ConfigError(
            "availabilityZone",
            f"{node.name} ({node.zone_id}) does not offer {instance_type}",
            f"choose a zone that does ({offering}), or another `instanceType`",
        )
    _eks_accepts("availabilityZone", node, zones)
    if control_plane_zone == "auto":
        candidates = [
            z
            for z in zones
            if z.zone_id != node.zone_id and z.zone_id not in catalog.EKS_UNSUPPORTED_ZONE_IDS
        ]
        if not candidates:
            raise ConfigError(
                "controlPlaneZone",
                f"{region} has no second zone EKS accepts besides {node.name}",
                "choose another `region`",
            )
        second = candidates[0]
    else:
        second = _find("controlPlaneZone", control_plane_zone, zones, region)
        _eks_accepts("controlPlaneZone", second, zones)
        if second.zone_id == node.zone_id:
            raise ConfigError(
                "controlPlaneZone",
                f"{control_plane_zone} is the node zone {node.name} (EKS needs two zones)",
                "choose another zone of the region, or auto",
            )
    return ZonePlacement(node=node, control_plane=second)
