"""What the plan's dollars are made of: list prices from the facts table (`instances.toml`), each
with its source and the date it was read (`as_of`: the page's own date where older). No price is
looked up at plan time. A type or region without a price is left out, and the plan says "no price
in the catalogue" instead of inventing one. The table prices one region, us-east-1: a stack
elsewhere is costed at those list prices and every view says so (`CostBreakdown.price_region`).
"""

from __future__ import annotations

from infra.plan.facts import FACTS, EksVersion, Price

#: Hours in the month the plan quotes (AWS's own calculator uses 730).
HOURS_PER_MONTH = 730
#: The date these prices were collected.
READ_ON = FACTS.prices_read
#: The one region the catalogue has list prices for.
PRICE_REGION = FACTS.price_region

#: The services' list prices by their key in the facts table ("nlb_hour", "nat_gb", ...).
SERVICES = FACTS.prices
#: Each EKS minor version's support calendar.
EKS_VERSIONS: dict[str, EksVersion] = FACTS.eks_versions

#: AWS commercial and GovCloud regions (the EC2 `describe-regions` names), so a misspelt region is
#: caught before it blames the availability zone.
KNOWN_REGIONS: tuple[str, ...] = (
    "af-south-1", "ap-east-1", "ap-east-2", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3",
    "ap-south-1", "ap-south-2", "ap-southeast-1", "ap-southeast-2", "ap-southeast-3",
    "ap-southeast-4", "ap-southeast-5", "ap-southeast-7", "ca-central-1", "ca-west-1",
    "eu-central-1", "eu-central-2", "eu-north-1", "eu-south-1", "eu-south-2", "eu-west-1",
    "eu-west-2", "eu-west-3", "il-central-1", "me-central-1", "me-south-1", "mx-central-1",
    "sa-east-1", "us-east-1", "us-east-2", "us-gov-east-1", "us-gov-west-1", "us-west-1",
    "us-west-2",
)  # fmt: skip


def ec2_price(instance_type: str) -> Price | None:
    """The catalogue's on-demand price of `instance_type`, or None when no source gave one."""
    instance = FACTS.types.get(instance_type)
    if instance is None:
        return None
    source = instance.sources["usd_per_hour"]
    return Price(instance.usd_per_hour, "per instance-hour", source.cite, source.as_of)
