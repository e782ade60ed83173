"""Values that reach AWS, checked at plan time against AWS's own rules.

A value AWS refuses must not get as far as `pulumi up`, where the call that carries it fails after
the calls before it have created what they create. Each rule here is AWS's (or the path's) own,
with its source, and each refusal is one `ConfigError` whose fix is itself accepted: where the
fix is the user's value with the offending characters replaced, that value is shown.

- Tags: every key and value of `tags`, and `owner` (the `owner` tag), reach the AWS provider's
  default tags (so IAM roles and the EKS cluster carry them) and the load balancer's tag
  annotation.
- Zone names: the letter after the region must be one of that region's zones.
- `downloadMBps`: at least 1 MB/s, at most what the node type moves through an internet gateway.
"""

from __future__ import annotations

import math

from infra.plan import catalog
from infra.plan.config import ConfigError, StackConfig
from infra.plan.config_parts import ZONE_NAME

#: AWS allows 50 tags per resource; the stack adds four of its own (project, stack, owner, endDate).
MAX_USER_TAGS = 46
#: Tag key and value lengths and characters, as EKS (TagResource) and IAM (TagRole) take them:
#: letters, digits and spaces representable in UTF-8 and `_ . : / = + - @`; keys 1 to 128, values
#: 0 to 256; the `aws:` prefix is reserved (IAM API Reference, `Tag` data type, pattern
#: `[\p{L}\p{Z}\p{N}_.:/=+\-@]*`; EKS API Reference, `TagResource`; both read 2026-12-01).
MAX_TAG_KEY = 128
MAX_TAG_VALUE = 256
#: `=` is allowed by AWS but not here: the load balancer gets the tags through a "k=v,k=v"
#: annotation that the cloud provider splits on "," and "=" (kubernetes/cloud-provider-aws
#: pkg/providers/v1/aws_loadbalancer.go, getKeyValuePropertiesFromAnnotation).
TAG_PUNCTUATION = "_.:/+-@"
TAG_RULE = "letters, digits, spaces and _ . : / + - @"

#: The letters of each region's zone names. Source: "AWS Availability Zones" (AWS Global
#: Infrastructure documentation, docs.aws.amazon.com/global-infrastructure/latest/regions/
#: aws-availability-zones.html, read 2026-12-01): a zone name is the region and a letter, and each
#: region has as many zones as AZ IDs. In the four oldest regions whose names are mapped per
#: account (us-east-1, us-west-1, ap-northeast-1, ca-central-1) an account's letters may skip one,
#: so their letters run one past the count: the table may accept a name an account lacks (the
#: preview's check against the account's own zones refuses it, `infra.plan.zones`), never refuse
#: a name some account has.
ZONE_LETTERS: dict[str, str] = {
    "af-south-1": "abc", "ap-east-1": "abc", "ap-east-2": "abc", "ap-northeast-1": "abcd",
    "ap-northeast-2": "abcd", "ap-northeast-3": "abc", "ap-south-1": "abc", "ap-south-2": "abc",
    "ap-southeast-1": "abc", "ap-southeast-2": "abc", "ap-southeast-3": "abc",
    "ap-southeast-4": "abc", "ap-southeast-5": "abc", "ap-southeast-7": "abc",
    "ca-central-1": "abcd", "ca-west-1": "abc", "eu-central-1": "abc", "eu-central-2": "abc",
    "eu-north-1": "abc", "eu-south-1": "abc", "eu-south-2": "abc", "eu-west-1": "abc",
    "eu-west-2": "abc", "eu-west-3": "abc", "il-central-1": "abc", "me-central-1": "abc",
    "me-south-1": "abc", "mx-central-1": "abc", "sa-east-1": "abc", "us-east-1": "abcdef",
    "us-east-2": "abc", "us-gov-east-1": "abc", "us-gov-west-1": "abc", "us-west-1": "abc",
    "us-west-2": "abcd",
}  # fmt: skip

#: The slowest model download the plan takes, in MB/s. Below it the cold start runs to days and
#: the startup timeout derived from it stops being a bound at all.
MIN_DOWNLOAD_MBPS = 1.0
#: What an instance sends or receives through an internet gateway, in Gbit/s: 5 below 32 vCPUs,
#: else half the instance's bandwidth or 5, whichever is larger ("Amazon EC2 instance network
#: bandwidth", EC2 User Guide, read 2026-12-01). Every catalogued type under 32 vCPUs bursts to
#: 10 Gbit/s or more, so the gateway's 5 binds; from 32 vCPUs the sustained figure is the
#: catalogue's baseline. The upper end of what the path allows: only rates no node of the type
#: can reach are refused.
INTERNET_GBPS_BELOW_32_VCPU = 5.0


def internet_download_mbps(instance: catalog.InstanceType) -> float:
    """The most `instance` downloads from the internet, in MB/s (10^6 bytes)."""
    gbps = INTERNET_GBPS_BELOW_32_VCPU
    if instance.vcpu >= 32:
        gbps = max(gbps, instance.network_mbps / 1000 / 2)
    return gbps * 1000 / 8


def check(cfg: StackConfig) -> None:
    """Every rule of this module on a validated config; the first refusal is raised."""
    check_tags(cfg)
    check_zone_letters(cfg)
    check_download_rate(cfg)


def _bad_char(text: str) -> str | None:
    for char in text:
        if not (char.isalnum() or char == " " or char in TAG_PUNCTUATION):
            return char
    return None


#: Tag keys the stack sets itself (`infra.adapters.wiring.stack_tags`); `tags` may not use them.
MANAGED_TAG_KEYS = frozenset({"project", "stack", "owner", "endDate"})


def _cleaned(text: str, limit: int, fallback: str, taken: frozenset[str] = frozenset()) -> str:
    """`text` with every character a tag refuses replaced by `-`, cut to `limit`, and made
    different from the keys in `taken` (so a suggested key is itself accepted)."""
    kept = "".join(c if _bad_char(c) is None else "-" for c in text)[:limit].strip(" -")
    if kept.lower().startswith("aws:"):
        kept = kept[4:]
    kept = kept or fallback
    while kept in taken:
        kept = f"{kept[: limit - 2]}-2"
    return kept


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "...")


def check_tags(cfg: StackConfig) -> None:
    """Tag keys and values (of `tags` and `owner`) as EKS and IAM accept them."""
    if len(cfg.tags) > MAX_USER_TAGS:
        raise ConfigError(
            "tags",
            f"has {len(cfg.tags)} tags; AWS allows 50 per resource and the stack sets 4",
            f"keep at most {MAX_USER_TAGS}",
        )
    for key, value in cfg.tags.items():
        taken = MANAGED_TAG_KEYS | (set(cfg.tags) - {key})
        if key.lower().startswith("aws:"):
            raise ConfigError(
                "tags",
                f"key {_shown(key)} starts with aws:, a prefix AWS reserves for itself",
                f"rename it, such as {_cleaned(key[4:], MAX_TAG_KEY, 'team', taken)!r}",
            )
        problem = _problem(key, MAX_TAG_KEY, "rename it, such as", "team", taken)
        if problem or not key:
            held, fix = problem or ("is empty", "rename it, such as 'team'")
            raise ConfigError(
                "tags", f"key {_shown(key)} {held}; a tag key is 1 to {MAX_TAG_KEY} {TAG_RULE}", fix
            )
        problem = _problem(value, MAX_TAG_VALUE, "use", "none")
        if problem:
            raise ConfigError(
                "tags",
                f"value of {_shown(key)} {problem[0]}; a tag value is at most {MAX_TAG_VALUE} "
                f"{TAG_RULE}",
                problem[1],
            )
    problem = _problem(cfg.owner, MAX_TAG_VALUE, "use", "ml-platform")
    if problem:
        raise ConfigError(
            "owner",
            f"{_shown(cfg.owner)} {problem[0]}; it becomes the tag `owner`, whose value is at "
            f"most {MAX_TAG_VALUE} {TAG_RULE}",
            problem[1],
        )


def _problem(
    text: str, limit: int, verb: str, fallback: str, taken: frozenset[str] = frozenset()
) -> tuple[str, str] | None:
    """(what is wrong, the fix) for a tag key or value, or None when AWS takes it."""
    bad = _bad_char(text)
    if bad is not None:
        return f"holds {bad!r}", f"{verb} {_cleaned(text, limit, fallback, taken)!r}"
    if len(text) > limit:
        return f"is {len(text)} characters long", f"shorten it to {limit} characters"
    return None


def check_zone_letters(cfg: StackConfig) -> None:
    """A zone name of the stack's region ends in one of that region's zone letters."""
    letters = ZONE_LETTERS.get(cfg.region)
    if letters is None:
        return
    for key, zone, other in (
        ("availabilityZone", cfg.availability_zone, cfg.control_plane_zone),
        ("controlPlaneZone", cfg.control_plane_zone, cfg.availability_zone),
    ):
        if not ZONE_NAME.fullmatch(zone) or zone[len(cfg.region) :] in letters:
            continue
        choice = next(f"{cfg.region}{x}" for x in letters if f"{cfg.region}{x}" != other)
        raise ConfigError(
            key,
            f"{zone} is not a zone of {cfg.region}, whose zones are "
            f"{cfg.region}{letters[0]} to {cfg.region}{letters[-1]}",
            f"use one of them, such as {choice}",
        )


def check_download_rate(cfg: StackConfig) -> None:
    """`downloadMBps` between 1 MB/s and what the node type moves through an internet gateway."""
    rate = cfg.download_mbps
    if math.isnan(rate) or rate < MIN_DOWNLOAD_MBPS:
        raise ConfigError(
            "downloadMBps",
            f"{rate:g} MB/s is below {MIN_DOWNLOAD_MBPS:g} MB/s, the slowest model download the "
            "plan takes",
            "use a measured rate of at least 1, or the default 140",
        )
    instance = catalog.INSTANCE_TYPES.get(cfg.instance_type)
    if instance is None:
        return  # the planner names an unknown type itself
    top = internet_download_mbps(instance)
    if rate > top:
        raise ConfigError(
            "downloadMBps",
            f"{rate:g} MB/s is above {top:g} MB/s, the most an {instance.name} moves through an "
            "internet gateway (EC2 caps that at 5 Gbit/s below 32 vCPUs, else at half the "
            "instance's bandwidth)",
            f"use {top:g} or less, such as 140",
        )
