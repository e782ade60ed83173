"""Input rules beyond the config model's types: AWS names and limits, address ranges, dates.

`check_raw` runs on the raw values before the model (so a misspelt region is named before the
availability-zone rule blames the zone), `check_config` on the validated model, and `check_dates`
on the validated model and a day (the planner stays pure; the readers pass today). Each refusal is
one `ConfigError` naming the key, the rule and a fix that is itself accepted.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import difflib
import ipaddress
import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from infra.plan import aws_inputs, prices
from infra.plan.config import ConfigError, StackConfig
from infra.plan.config_parts import THIS_NETWORK

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


def check_raw(raw: Mapping[str, Any]) -> None:
    """Rules on the values as written, before the config model reads them."""
    region = raw.get("region")
    if isinstance(region, str) and region not in prices.KNOWN_REGIONS:
        other = next((v for k, v in _OTHER_PARTITIONS.items() if region.startswith(k)), None)
        fix = _region_fix(raw, region if other is None else None)
        if other is None:
            raise ConfigError("region", f"{region} is not an AWS region", fix)
        raise ConfigError(
            "region",
            f"{region} is {other}, outside the commercial and GovCloud regions the project "
            "deploys to",
            fix,
        )


def _region_fix(raw: Mapping[str, Any], misspelt: str | None) -> str:
    """`use <region>` (with a zone of it when the stack's is not), for a region of the project's
    that this stack accepts: the nearest spelling of a misspelt one, else the certificate's
    region, the default and then every other in turn."""
    close = difflib.get_close_matches(misspelt, prices.KNOWN_REGIONS, n=1) if misspelt else []
    certificate = str(raw.get("tlsCertificateArn") or "").split(":")
    candidates = [
        *close,
        *(certificate[3:4] if len(certificate) > 3 else []),
        str(StackConfig.model_fields["region"].default),
        *prices.KNOWN_REGIONS,
    ]
    zone = raw.get("availabilityZone")
    first = None
    for region in dict.fromkeys(c for c in candidates if c in prices.KNOWN_REGIONS):
        change: dict[str, Any] = {"region": region}
        if isinstance(zone, str) and not zone.startswith(region):
            change["availabilityZone"] = f"{region}a"
        fix = f"use {region}" + (
            f" with `availabilityZone` {region}a" if "availabilityZone" in change else ""
        )
        first = first or fix
        if _accepted({**raw, **change}):
            return fix
    return first or "use a region name such as us-west-2"


def list_syntax(refused: ConfigError, raw: Mapping[str, Any]) -> ConfigError:
    """A single value where a list belongs: the same refusal, with the list written out as
    `--set` and the stack file take it, for an example this stack accepts (the value itself as a
    one-item list, else its first address alone, else the key's default); `refused` as it is
    when none is."""
    key, value = refused.key, raw.get(refused.key)
    field = next((f for n, f in StackConfig.model_fields.items() if (f.alias or n) == key), None)
    if field is None or not isinstance(value, str):
        return refused
    as_list = [v.strip() for v in value.split(",") if v.strip()]
    examples = [as_list]
    with contextlib.suppress(ValueError):
        first = ipaddress.IPv4Network(value.strip(), strict=False)[0]
        if first not in THIS_NETWORK:
            examples.append([f"{first}/32"])
    for example in examples:
        if example and _refusal({**raw, key: example}) is None:
            return _as_list(refused, example)
    # The value written as a list is still refused by a rule of its own key (0.0.0.0/0 over
    # plain HTTP): that rule is the mistake to name, not the list syntax alone.
    rule = _refusal({**raw, key: as_list}) if as_list else None
    if rule is not None and rule.key == key:
        return ConfigError(
            key,
            f"{refused.rule}, as --set '{key}={json.dumps(as_list)}' writes one, but as a list "
            f"{rule.rule}",
            rule.fix,
        )
    if isinstance(field.default, tuple) and _accepted({**raw, key: list(map(str, field.default))}):
        return _as_list(refused, [str(v) for v in field.default])
    return refused


def _as_list(refused: ConfigError, example: list[str]) -> ConfigError:
    key = refused.key
    shown = json.dumps(example)
    return ConfigError(
        key,
        refused.rule,
        f"write a list, as --set '{key}={shown}' or one `- {example[0]}` line per item "
        "under the key in the stack file",
    )


def _refusal(raw: Mapping[str, Any]) -> ConfigError | None:
    """The refusal the config model and the rules give these values, if any."""
    try:
        check_raw(raw)
        check_config(StackConfig.model_validate(raw))
    except ConfigError as error:
        return error
    except ValidationError as error:
        from infra.plan.config_errors import _to_config_error  # the refusal's line, refused only

        return _to_config_error(error, raw)
    return None


def _accepted(raw: Mapping[str, Any]) -> bool:
    """Whether the config model and the rules take these values."""
    return _refusal(raw) is None


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
