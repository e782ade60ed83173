"""Input rules beyond the config model's types: AWS names and limits, address ranges, dates.

`region_refusal` runs on the raw values before the model (so a misspelt region is named before the
availability-zone rule blames the zone), `check_config` on the validated model, and `check_dates`
on the validated model and a day (the planner stays pure; the readers pass today). Each refusal is
one `ConfigError` naming the key, the rule and a fix that is itself accepted (the fixes that try
other values: `infra.plan.config_fixes`).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Mapping
from typing import Any

from infra.plan import aws_inputs, prices
from infra.plan.config import ConfigError, StackConfig

#: Each client range becomes a security-group rule; EC2's default quota is 60 rules per group.
MAX_ALLOWED_CIDRS = 50
_PRIVATE_RANGES = tuple(
    ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
)
#: How far ahead a refused past `endDate` is moved by the suggested fix.
END_DATE_FIX_DAYS = 90


#: Region prefixes of the AWS partitions the project does not deploy to (China, the isolated
#: ones, the European Sovereign Cloud): real regions, so no misspelling of a supported one.
_OTHER_PARTITIONS = {
    "cn-": "an AWS China region",
    "us-iso": "an AWS isolated region",
    "eu-iso": "an AWS isolated region",
    "eusc-": "an AWS European Sovereign Cloud region",
}


def other_partition(region: str) -> str | None:
    """Which partition the project does not deploy to `region` is a region of, if any."""
    return next((v for k, v in _OTHER_PARTITIONS.items() if region.startswith(k)), None)


def region_refusal(raw: Mapping[str, Any]) -> str | None:
    """The rule the region breaks as written, before the config model reads the values; its
    fix is `config_fixes.region_fix`, loaded only then."""
    region = raw.get("region")
    if not isinstance(region, str) or region in prices.KNOWN_REGIONS:
        return None
    other = other_partition(region)
    if other is None:
        return f"{region} is not an AWS region"
    return (
        f"{region} is {other}, outside the commercial and GovCloud regions the project deploys to"
    )


def _private(network: ipaddress.IPv4Network) -> bool:
    return any(network.subnet_of(block) for block in _PRIVATE_RANGES)


def check_config(cfg: StackConfig) -> None:
    """Rules on the validated config: address ranges, list lengths, versions, and the values
    that reach AWS (`infra.plan.aws_inputs`)."""
    if not _private(cfg.vpc_cidr):
        raise ConfigError(
            "vpcCidr",
            f"{cfg.vpc_cidr} is not a private (RFC 1918) range; the VPC's addresses must not "
            "shadow public ones",
            "use a private range such as 10.42.0.0/16",
        )
    if len(cfg.allowed_cidrs) > MAX_ALLOWED_CIDRS:
        raise ConfigError(
            "allowedCidrs",
            f"lists {len(cfg.allowed_cidrs)} ranges, more than {MAX_ALLOWED_CIDRS} (each is a "
            "security-group rule; EC2 allows 60 per group)",
            "merge them into fewer, wider ranges",
        )
    if not cfg.private_clients_only:
        # A private range in an internet-facing list admits nobody: the NLB sees public
        # addresses. A list of private ranges only makes the load balancer internal instead.
        for network in filter(_private, cfg.allowed_cidrs):
            raise ConfigError(
                "allowedCidrs",
                f"mixes {network}, a private range, with public ones, but an internet-facing load "
                "balancer sees clients' public addresses only",
                "list only public egress ranges such as 203.0.113.0/24, or only private ranges "
                "for an internal load balancer",
            )
    aws_inputs.check(cfg)
    known = sorted(prices.EKS_VERSIONS, key=lambda v: int(v.split(".")[1]))
    minor = int(cfg.kubernetes_version.split(".")[1])
    newest = int(known[-1].split(".")[1])
    if minor > newest + 1:
        raise ConfigError(
            "kubernetesVersion",
            f"{cfg.kubernetes_version} is newer than any EKS version the catalogue knows "
            f"(newest {known[-1]})",
            f"use {known[-1]}",
        )


def check_dates(cfg: StackConfig, today: dt.date) -> None:
    """Rules that depend on the day: an end date in the past, a version EKS no longer runs."""
    newest = max(prices.EKS_VERSIONS, key=lambda v: int(v.split(".")[1]))
    if cfg.end_date < today:
        later = today + dt.timedelta(days=END_DATE_FIX_DAYS)
        raise ConfigError(
            "endDate",
            f"{cfg.end_date} is in the past (today is {today}); clean-up jobs treat the stack "
            "as expired",
            f"set a future date such as {later}",
        )
    version = prices.EKS_VERSIONS.get(cfg.kubernetes_version)
    oldest = min(prices.EKS_VERSIONS, key=lambda v: int(v.split(".")[1]))
    minor = int(cfg.kubernetes_version.split(".")[1])
    if version is None and minor < int(oldest.split(".")[1]):
        raise ConfigError(
            "kubernetesVersion",
            f"{cfg.kubernetes_version} is older than any version EKS still runs",
            f"use {newest}",
        )
    if version is not None and today > version.end_of_extended:
        raise ConfigError(
            "kubernetesVersion",
            f"{cfg.kubernetes_version} left EKS extended support on {version.end_of_extended}; "
            "EKS no longer creates clusters of it",
            f"use {newest}",
        )
