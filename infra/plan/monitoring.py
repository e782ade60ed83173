"""What watching a stack adds: the alarms' planned thresholds and the monthly cost of the
metrics, dashboard, alarms and metric ingestion (`components.watch` defines what is created).

Pure: the watch spec (`infra.plan.watching`) takes the thresholds from here, the plan's cost lines
take the counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from components import watch
from infra.plan import prices
from infra.plan.prices import HOURS_PER_MONTH, SERVICES

#: Alarm when the front door answers more 5xx than this in 5 minutes: vLLM or the group is
#: failing, not a client (the gatekeeper's own refusals are 4xx).
SERVER_ERRORS_PER_5_MINUTES = 5
#: Alarms a fixed stack creates and the metrics they read (`watch.alarms`): one metric each.
ALARMS = 6
ALARM_METRICS = 6
#: An elastic stack's: not-waking and idle-nodes (two metrics each) in place of group-restart and
#: no-metrics (one each).
ELASTIC_ALARMS = 6
ELASTIC_ALARM_METRICS = 8
DASHBOARDS = 1
#: EMF bytes one group's leader writes per scrape: one event for the plain metrics, one per
#: histogram bucket (their `le` dimension differs) and, on a fixed stack, one for its own record
#: (its `group` dimension), ~350 bytes each. An estimate: measure it with the metrics log
#: group's IncomingBytes.
EMF_BYTES_PER_EVENT = 350


def waiting_threshold(waiting_key: int | str, max_concurrency: float, replicas: int) -> int:
    """`waitingRequestsAlarm` auto: as many requests as the KV cache holds at once, over every
    group. More than that waiting means a new request waits at least one whole reply."""
    if waiting_key == "auto":
        return max(1, math.floor(max_concurrency)) * replicas
    return int(waiting_key)


def alarm_count(elastic: bool = False) -> tuple[int, int]:
    """The alarms the stack creates and the metrics they read, which CloudWatch bills."""
    return (ELASTIC_ALARMS, ELASTIC_ALARM_METRICS) if elastic else (ALARMS, ALARM_METRICS)


def emf_gb_per_month(replicas: int, elastic: bool = False) -> float:
    record = 0 if elastic else 1
    events = 1 + record + sum(len(bounds) + 1 for bounds in watch.BUCKETS.values())
    scrapes = HOURS_PER_MONTH * 3600 / 60
    return replicas * scrapes * events * EMF_BYTES_PER_EVENT / 1e9


@dataclass(frozen=True)
class MonitoringCost:
    item: str
    usd_per_month: float
    basis: str
    price: prices.Price
    estimate: bool = False


def monitoring_costs(replicas: int, elastic: bool = False) -> list[MonitoringCost]:
    """Monthly cost of what `monitoring: true` adds (an elastic stack's door adds its asleep
    answers, and its alarms are its own: `alarm_count`)."""
    metrics = watch.custom_metric_count(elastic, replicas)
    records = watch.self_metric_count(replicas, elastic)
    alarms, alarm_metrics = alarm_count(elastic)
    gb = emf_gb_per_month(replicas, elastic)
    return [
        MonitoringCost(
            "cloudwatch custom metrics",
            metrics * SERVICES["cloudwatch_metric_month"].usd,
            f"{metrics} metrics: vLLM gauges and counters, every latency bucket, "
            + (f"{records} of the leaders' own start-up measurements, " if records else "")
            + f"{len(watch.ANSWER_CLASSES) + (1 if elastic else 0)} answer counts",
            SERVICES["cloudwatch_metric_month"],
        ),
        MonitoringCost(
            "cloudwatch dashboard",
            DASHBOARDS * SERVICES["cloudwatch_dashboard_month"].usd,
            "one dashboard (free if the account has fewer than 3)",
            SERVICES["cloudwatch_dashboard_month"],
        ),
        MonitoringCost(
            "cloudwatch alarms",
            alarm_metrics * SERVICES["cloudwatch_alarm_metric_month"].usd,
            f"{alarms} alarms reading {alarm_metrics} metrics (SNS e-mail: within the free tier)",
            SERVICES["cloudwatch_alarm_metric_month"],
        ),
        MonitoringCost(
            "metrics ingestion",
            gb * SERVICES["cloudwatch_logs_gb"].usd,
            f"{gb:.2f} GB a month of EMF events ({replicas} leader(s) scraped every minute)",
            SERVICES["cloudwatch_logs_gb"],
            estimate=True,
        ),
    ]
