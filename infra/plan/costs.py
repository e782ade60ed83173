"""What a planned stack costs per hour and per month, line by line, from `infra.plan.prices`.

Every line says what it counts (`basis`), where its price comes from (`source`) and whether the
quantity is an estimate (traffic, logs and downloads depend on use; the plan cannot know them).
Figures are on-demand list prices without tax, free tier or discounts.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass

from infra.plan import prices
from infra.plan.prices import HOURS_PER_MONTH, SERVICES, Price

#: Public IPv4 addresses of the internet-facing NLB: one per public subnet (two zones).
NLB_ADDRESSES = 2
#: Throughput the per-rank model volumes are provisioned with (`wiring.STORAGE_THROUGHPUT_MIBPS`).
VOLUME_THROUGHPUT_MIBPS = 250
GP3_FREE_THROUGHPUT_MIBPS = 125
#: Container logs shipped per node per day (vLLM's 10 s stats lines per rank, request lines, add-on
#: and system pods). An estimate: measure it with the log group's IncomingBytes metric.
LOG_MB_PER_NODE_DAY = 50
#: Bytes on the wire per streamed token (one server-sent event chunk), for the NLB's capacity units.
BYTES_PER_STREAMED_TOKEN = 250
#: Cold starts a month that download the checkpoint through the NAT gateway (an estimate: one, the
#: first deploy; every restart without `modelCache: volume` adds another).
STARTS_PER_MONTH = 1


@dataclass(frozen=True)
class CostLine:
    """One itemised cost."""

    item: str
    usd_per_hour: float
    usd_per_month: float
    basis: str
    source: str
    estimate: bool = False


@dataclass(frozen=True)
class CostBreakdown:
    """A stack's costs; totals are None when a line has no price in the catalogue."""

    lines: tuple[CostLine, ...]
    usd_per_hour: float | None
    usd_per_month: float | None
    price_region: str
    stack_region: str
    missing: tuple[str, ...]
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["lines"] = [asdict(line) for line in self.lines]
        data["missing"] = list(self.missing)
        data["notes"] = list(self.notes)
        return data


def _line(item: str, hourly: float, basis: str, price: Price, estimate: bool = False) -> CostLine:
    return CostLine(
        item,
        round(hourly, 4),
        round(hourly * HOURS_PER_MONTH, 2),
        basis,
        f"${price.usd:g} {price.unit}; {price.source}",
        estimate,
    )


@dataclass(frozen=True)
class CostInputs:
    """What the cost model needs from a stack's config and plan (kept narrow so the comparison can
    cost a candidate without a second config)."""

    region: str
    kubernetes_version: str
    end_date: dt.date
    node_subnets: str
    instance_type: str
    nodes: int
    stages: int
    replicas: int
    node_disk_gib: int
    model_cache: str
    model_volume_gib: int
    checkpoint_bytes: int
    aggregate_tokens_per_s: float
    #: `monitoring: true`: the metrics, dashboard, alarms and their ingestion.
    monitoring: bool = False
    #: Groups follow the queue and the clock (the door's asleep answers are one more metric).
    elastic: bool = False
    #: A rollout's surge groups: with `modelCache: volume` their ranks keep volumes too.
    surge_groups: int = 0
    #: Into a cluster the stack does not own (`existingCluster`): its control plane, NAT
    #: gateway and their addresses are its owner's costs, not the stack's.
    existing_cluster: bool = False
    #: An internal NLB (every admitted range private): its addresses are private, none priced.
    internal_load_balancer: bool = False


def eks_rate(version: str, on: dt.date) -> Price:
    """The control plane's hourly price for `version` on the day `on`."""
    known = prices.EKS_VERSIONS.get(version)
    if known is not None and on > known.end_of_standard:
        return SERVICES["eks_extended"]
    return SERVICES["eks_standard"]


def stack_costs(inputs: CostInputs, today: dt.date) -> CostBreakdown:
    """Itemised $/hour and $/month of a stack at the catalogue's list prices."""
    lines: list[CostLine] = []
    missing: list[str] = []
    notes: list[str] = []
    node_price = prices.ec2_price(inputs.instance_type)
    if node_price is None:
        missing.append(f"{inputs.instance_type}: no price in the catalogue")
    else:
        lines.append(
            _line(
                "nodes",
                inputs.nodes * node_price.usd,
                f"{inputs.nodes} x {inputs.instance_type} on demand",
                node_price,
            )
        )
    if inputs.existing_cluster:
        notes.append(
            "the existing cluster's control plane, NAT gateway and its address are its owner's "
            "and not priced here"
        )
    if not inputs.existing_cluster:
        eks = eks_rate(inputs.kubernetes_version, today)
        support = "extended" if eks is SERVICES["eks_extended"] else "standard"
        lines.append(
            _line(
                "eks control plane",
                eks.usd,
                f"one cluster, Kubernetes {inputs.kubernetes_version} in {support} support",
                eks,
            )
        )
        version = prices.EKS_VERSIONS.get(inputs.kubernetes_version)
        if version is None:
            notes.append(
                f"no EKS support dates in the catalogue for {inputs.kubernetes_version}: the "
                "control plane is costed at the standard rate"
            )
        elif support == "standard" and version.end_of_standard < inputs.end_date:
            extra = (SERVICES["eks_extended"].usd - SERVICES["eks_standard"].usd) * HOURS_PER_MONTH
            notes.append(
                f"Kubernetes {inputs.kubernetes_version} leaves EKS standard support on "
                f"{version.end_of_standard}, before endDate {inputs.end_date}: from then the "
                f"control plane costs ${SERVICES['eks_extended'].usd:.2f}/h (+${extra:.0f}/month) "
                "unless the cluster is upgraded"
            )
    lines.append(_line("load balancer", SERVICES["nlb_hour"].usd, "one NLB", SERVICES["nlb_hour"]))
    gb_per_hour = inputs.aggregate_tokens_per_s * 3600 * BYTES_PER_STREAMED_TOKEN / 1e9
    lines.append(
        _line(
            "load balancer capacity",
            gb_per_hour * SERVICES["nlb_nlcu"].usd,
            f"{gb_per_hour:.3f} NLCU (1 GB/h each) at full load, "
            f"{BYTES_PER_STREAMED_TOKEN} bytes per streamed token",
            SERVICES["nlb_nlcu"],
            estimate=True,
        )
    )
    disk_gib = inputs.nodes * inputs.node_disk_gib
    lines.append(
        _line(
            "node disks",
            disk_gib * SERVICES["ebs_gp3_gb_month"].usd / HOURS_PER_MONTH,
            f"{inputs.nodes} x {inputs.node_disk_gib} GiB gp3",
            SERVICES["ebs_gp3_gb_month"],
        )
    )
    if inputs.model_cache == "volume":
        # The surge groups' claims are kept between rollouts (`manifests.model_claims`).
        volumes = inputs.stages * (inputs.replicas + inputs.surge_groups)
        per_volume = (
            inputs.model_volume_gib * SERVICES["ebs_gp3_gb_month"].usd
            + (VOLUME_THROUGHPUT_MIBPS - GP3_FREE_THROUGHPUT_MIBPS)
            * SERVICES["ebs_gp3_throughput_month"].usd
        )
        lines.append(
            _line(
                "model volumes",
                volumes * per_volume / HOURS_PER_MONTH,
                f"{volumes} x {inputs.model_volume_gib} GiB gp3 at {VOLUME_THROUGHPUT_MIBPS} MiB/s",
                SERVICES["ebs_gp3_gb_month"],
            )
        )
    # Nodes of an existing cluster reach the internet as its owner arranged (no address here).
    nat = inputs.node_subnets == "private" and not inputs.existing_cluster
    own = 0 if inputs.existing_cluster else (1 if nat else inputs.nodes)
    nlb = 0 if inputs.internal_load_balancer else NLB_ADDRESSES
    addresses = nlb + own
    lines.append(
        _line(
            "public ipv4",
            addresses * SERVICES["public_ipv4_hour"].usd,
            f"{addresses} addresses: "
            + ("none for the internal NLB, " if nlb == 0 else f"{nlb} for the NLB, ")
            + (
                "none of the cluster's"
                if inputs.existing_cluster
                else "1 for the NAT gateway"
                if nat
                else "1 per node"
            ),
            SERVICES["public_ipv4_hour"],
        )
    )
    if nat:
        lines.append(
            _line("nat gateway", SERVICES["nat_hour"].usd, "one NAT gateway", SERVICES["nat_hour"])
        )
        ranks = inputs.stages * inputs.replicas
        gb = STARTS_PER_MONTH * ranks * inputs.checkpoint_bytes / 1e9
        lines.append(
            _line(
                "nat data",
                gb * SERVICES["nat_gb"].usd / HOURS_PER_MONTH,
                f"{gb:.0f} GB a month: {STARTS_PER_MONTH} cold start(s) of {ranks} rank(s) "
                "downloading the checkpoint",
                SERVICES["nat_gb"],
                estimate=True,
            )
        )
    log_gb = inputs.nodes * LOG_MB_PER_NODE_DAY * HOURS_PER_MONTH / 24 / 1000
    lines.append(
        _line(
            "cloudwatch logs",
            log_gb * SERVICES["cloudwatch_logs_gb"].usd / HOURS_PER_MONTH,
            f"{log_gb:.1f} GB a month ingested ({LOG_MB_PER_NODE_DAY} MB per node per day)",
            SERVICES["cloudwatch_logs_gb"],
            estimate=True,
        )
    )
    if inputs.monitoring:
        from infra.plan.monitoring import monitoring_costs

        for cost in monitoring_costs(inputs.replicas, inputs.elastic):
            lines.append(
                _line(
                    cost.item,
                    cost.usd_per_month / HOURS_PER_MONTH,
                    cost.basis,
                    cost.price,
                    cost.estimate,
                )
            )
    if inputs.region != prices.PRICE_REGION:
        notes.append(
            f"no {inputs.region} prices in the catalogue: costed at {prices.PRICE_REGION} list "
            "prices, which differ by region"
        )
    hourly = None if missing else round(sum(line.usd_per_hour for line in lines), 4)
    return CostBreakdown(
        lines=tuple(lines),
        usd_per_hour=hourly,
        usd_per_month=None if hourly is None else round(hourly * HOURS_PER_MONTH, 2),
        price_region=prices.PRICE_REGION,
        stack_region=inputs.region,
        missing=tuple(missing),
        notes=tuple(notes),
    )


def usd_per_million_tokens(usd_per_hour: float | None, tokens_per_s: float) -> float | None:
    """Dollars per million output tokens at a steady `tokens_per_s`."""
    if usd_per_hour is None or tokens_per_s <= 0:
        return None
    return round(usd_per_hour / (tokens_per_s * 3600) * 1e6, 2)
