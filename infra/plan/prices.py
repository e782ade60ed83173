"""What the plan's dollars are made of: on-demand list prices, each with its source and the date it
was read. No price is looked up at plan time; a figure changes here, with its source, or not at all.

Reading rules:
- every `Price` names where it comes from (`source`) and the date that source was read or published
  (`as_of`); "read 2026-11-30" means the stored page was read on that day, an older date is the
  page's own;
- EC2 prices exist only where a source gave them. A type or region without one is left out, and the
  plan says "no price in the catalogue" instead of inventing a figure;
- the catalogue prices one region, us-east-1. A stack in another region is costed at those list
  prices and every view says so (`CostBreakdown.price_region`): Graviton prices differ between
  regions, so treat such a figure as a reference, not a quote.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

#: Hours in the month the plan quotes (AWS's own calculator uses 730).
HOURS_PER_MONTH = 730
#: The date these prices were collected.
READ_ON = dt.date(2026, 11, 30)
#: The one region the catalogue has list prices for.
PRICE_REGION = "us-east-1"


@dataclass(frozen=True)
class Price:
    """One list price with its unit, source and date."""

    usd: float
    unit: str
    source: str
    as_of: str


_KARPENTER = (
    "AWS Price List API figures for us-east-1 as committed in aws/karpenter-provider-aws "
    "pkg/providers/pricing/zz_generated.pricing_aws.go ('generated at 2026-07-20T13:44:30Z'), "
    f"read {READ_ON}"
)

#: On-demand Linux $/hour in us-east-1 for every catalogue type (shared tenancy).
_EC2_US_EAST_1: dict[str, float] = {
    "c6g.large": 0.068, "c6g.xlarge": 0.136, "c6g.2xlarge": 0.272, "c6g.4xlarge": 0.544,
    "c6g.8xlarge": 1.088,
    "c7g.large": 0.0725, "c7g.xlarge": 0.145, "c7g.2xlarge": 0.29, "c7g.4xlarge": 0.58,
    "c7g.8xlarge": 1.16,
    "c8g.large": 0.07976, "c8g.xlarge": 0.15952, "c8g.2xlarge": 0.31904, "c8g.4xlarge": 0.63808,
    "c8g.8xlarge": 1.27616,
    "m6g.large": 0.077, "m6g.xlarge": 0.154, "m6g.2xlarge": 0.308, "m6g.4xlarge": 0.616,
    "m6g.8xlarge": 1.232,
    "m7g.large": 0.0816, "m7g.xlarge": 0.1632, "m7g.2xlarge": 0.3264, "m7g.4xlarge": 0.6528,
    "m7g.8xlarge": 1.3056,
    "m8g.large": 0.08976, "m8g.xlarge": 0.17952, "m8g.2xlarge": 0.35904, "m8g.4xlarge": 0.71808,
    "m8g.8xlarge": 1.43616,
    "r6g.large": 0.1008, "r6g.xlarge": 0.2016, "r6g.2xlarge": 0.4032, "r6g.4xlarge": 0.8064,
    "r6g.8xlarge": 1.6128,
    "r7g.large": 0.1071, "r7g.xlarge": 0.2142, "r7g.2xlarge": 0.4284, "r7g.4xlarge": 0.8568,
    "r7g.8xlarge": 1.7136,
    "r8g.large": 0.11782, "r8g.xlarge": 0.23564, "r8g.2xlarge": 0.47128, "r8g.4xlarge": 0.94256,
    "r8g.8xlarge": 1.88512,
}  # fmt: skip

EC2_ON_DEMAND: dict[str, dict[str, Price]] = {
    PRICE_REGION: {
        name: Price(usd, "per instance-hour", _KARPENTER, "2026-07-20")
        for name, usd in _EC2_US_EAST_1.items()
    }
}

EKS_STANDARD = Price(
    0.10,
    "per cluster-hour",
    "AWS Containers blog 'Amazon EKS extended support for Kubernetes versions pricing' "
    "(aws.amazon.com/blogs/containers/amazon-eks-extended-support-for-kubernetes-versions-pricing)"
    f"; effective 2024-04-01, read {READ_ON}",
    "2024-04-01",
)
EKS_EXTENDED = Price(
    0.60,
    "per cluster-hour, in place of the standard rate",
    EKS_STANDARD.source,
    "2024-04-01",
)
NLB_HOUR = Price(
    0.0225,
    "per load balancer-hour",
    "clustercost.com/blog/network-load-balancer-pricing-2025 (us-east-1) and "
    f"awsnegotiations.com/elastic-load-balancer-cost.html (May 2026); read {READ_ON}",
    "2026-05",
)
NLB_NLCU = Price(0.006, "per NLCU-hour", NLB_HOUR.source, "2026-05")
EBS_GP3_GB_MONTH = Price(
    0.08,
    "per GiB-month",
    f"saisci.com/aws/gp3-throughput-explained (us-east-1, page of 2021-01-13); read {READ_ON}",
    "2021-01-13",
)
EBS_GP3_THROUGHPUT_MONTH = Price(
    0.04, "per MiB/s-month above 125 MiB/s", EBS_GP3_GB_MONTH.source, "2021-01-13"
)
PUBLIC_IPV4_HOUR = Price(
    0.005,
    "per public IPv4 address-hour",
    "doit.com/aws-public-ipv4-price-increase-the-complete-guide and community.aws 'AWS to Charge "
    f"Public IPv4 Addresses' (effective 2024-02-01, all regions); read {READ_ON}",
    "2024-02-01",
)
NAT_HOUR = Price(
    0.045,
    "per NAT gateway-hour",
    f"basavytix.com/blog/aws-nat-gateway-pricing (us-east-1 rates); read {READ_ON}",
    "2026",
)
NAT_GB = Price(0.045, "per GB processed", NAT_HOUR.source, "2026")
CLOUDWATCH_LOGS_GB = Price(
    0.50,
    "per GB ingested (standard log class)",
    f"c3x.dev/blog/cloudwatch-logs-cost-optimization ('us-east-1, June 2026'); read {READ_ON}",
    "2026-06",
)

_CLOUDWATCH_METRICS = (
    "vantage.sh/blog/cloudwatch-metrics-pricing-explained-in-plain-english and "
    f"moderntechnologist.com/amazon-cloudwatch-pricing-explained (us-east-1); read {READ_ON}"
)
CLOUDWATCH_METRIC_MONTH = Price(
    0.30, "per custom metric-month (first 10,000)", _CLOUDWATCH_METRICS, "2026"
)
CLOUDWATCH_DASHBOARD_MONTH = Price(
    3.00, "per dashboard-month (the account's first 3 are free)", _CLOUDWATCH_METRICS, "2026"
)
CLOUDWATCH_ALARM_METRIC_MONTH = Price(
    0.10, "per standard-resolution alarm metric-month", _CLOUDWATCH_METRICS, "2026"
)


@dataclass(frozen=True)
class EksVersion:
    """An EKS Kubernetes minor version's support calendar."""

    version: str
    released: dt.date
    end_of_standard: dt.date
    end_of_extended: dt.date


_EOL_SOURCE = (
    "endoflife.date/amazon-eks (page of about 2026-02-14), matching the EKS user guide's rule of "
    f"14 months standard plus 12 months extended support; read {READ_ON}"
)
EKS_VERSIONS_SOURCE = _EOL_SOURCE
EKS_VERSIONS: dict[str, EksVersion] = {
    v.version: v
    for v in (
        EksVersion("1.30", dt.date(2024, 5, 23), dt.date(2025, 7, 23), dt.date(2026, 7, 23)),
        EksVersion("1.31", dt.date(2024, 9, 26), dt.date(2025, 11, 26), dt.date(2026, 11, 26)),
        EksVersion("1.32", dt.date(2025, 1, 25), dt.date(2026, 3, 23), dt.date(2027, 3, 23)),
        EksVersion("1.33", dt.date(2025, 5, 28), dt.date(2026, 7, 29), dt.date(2027, 7, 29)),
        EksVersion("1.34", dt.date(2025, 10, 6), dt.date(2026, 12, 2), dt.date(2027, 12, 2)),
        EksVersion("1.35", dt.date(2026, 1, 28), dt.date(2027, 3, 27), dt.date(2028, 3, 27)),
    )
}

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
    return EC2_ON_DEMAND[PRICE_REGION].get(instance_type)


def eks_rate(version: str, on: dt.date) -> Price:
    """The control plane's hourly price for `version` on the day `on`."""
    known = EKS_VERSIONS.get(version)
    if known is not None and on > known.end_of_standard:
        return EKS_EXTENDED
    return EKS_STANDARD
