"""What watching adds to the plan: its itemised monthly cost, off with `monitoring: false`, and
the alarms' planned thresholds."""

from __future__ import annotations

import datetime as dt

import pytest

from components import watch
from infra.plan import monitoring, prices, watching
from infra.plan.economics import economics
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from tests import builders

TODAY = dt.date(2026, 11, 30)
ITEMS = (
    "cloudwatch custom metrics",
    "cloudwatch dashboard",
    "cloudwatch alarms",
    "metrics ingestion",
)


def _lines(**overrides: object) -> dict[str, float]:
    cfg = load_stack("dev", dict(overrides), today=TODAY)
    costs = economics(cfg, plan(cfg, "dev"), TODAY).costs
    return {line.item: line.usd_per_month for line in costs.lines}


def test_monitoring_is_itemised_and_the_key_turns_it_off() -> None:
    on, off = _lines(), _lines(monitoring=False)
    assert all(item in on for item in ITEMS)
    assert not any(item in off for item in ITEMS)
    # dev runs one group (a metric per group of each leader's record: test_watch.py).
    metrics = watch.custom_metric_count(groups=1)
    assert on["cloudwatch custom metrics"] == round(
        metrics * prices.SERVICES["cloudwatch_metric_month"].usd, 2
    )
    assert on["cloudwatch dashboard"] == prices.SERVICES["cloudwatch_dashboard_month"].usd
    # dev is a fixed stack: six alarms of one metric each (test_watch.py counts them).
    assert on["cloudwatch alarms"] == round(
        6 * prices.SERVICES["cloudwatch_alarm_metric_month"].usd, 2
    )
    added = sum(on[item] for item in ITEMS)
    assert 15 < added < 30, added
    shared = {k: v for k, v in on.items() if k not in ITEMS}
    assert shared == off


def test_waiting_threshold_is_the_concurrency_the_kv_cache_holds() -> None:
    cfg, p = builders.planned("dev", today=TODAY)
    auto = watching.watch_spec(cfg, p)
    assert auto.waiting_threshold == int(p.max_concurrency) * p.replicas == 10
    set_to_7 = load_stack("dev", {"waitingRequestsAlarm": 7}, today=TODAY)
    assert watching.watch_spec(set_to_7, plan(set_to_7, "dev")).waiting_threshold == 7
    assert auto.server_errors_threshold == monitoring.SERVER_ERRORS_PER_5_MINUTES
    # no-metrics waits out the start-up timeout a first deploy's cold start ends within.
    assert auto.startup_s == p.startup_timeout_seconds
    # Every group's, and at least one request.
    assert monitoring.waiting_threshold("auto", 3.7, 2) == 6
    assert monitoring.waiting_threshold("auto", 0.4, 3) == 3
    assert monitoring.waiting_threshold("auto", 1.0, 1) == 1


def test_ingestion_is_one_event_a_minute_per_leader_and_dimension_set() -> None:
    """The collector writes, per leader and scrape (one a minute), one EMF event for the plain
    metrics, one per histogram bucket bound (`le`, +Inf included) and, on a fixed stack, one
    for the leader's own record (its `group` dimension)."""
    buckets = sum(len(bounds) + 1 for bounds in watch.BUCKETS.values())
    minutes = monitoring.HOURS_PER_MONTH * 60
    one = monitoring.emf_gb_per_month(1)
    assert one * 1e9 == pytest.approx(minutes * (2 + buckets) * monitoring.EMF_BYTES_PER_EVENT)
    assert monitoring.emf_gb_per_month(3) == pytest.approx(3 * one)
    behind_door = monitoring.emf_gb_per_month(1, elastic=True)
    assert behind_door * 1e9 == pytest.approx(
        minutes * (1 + buckets) * monitoring.EMF_BYTES_PER_EVENT
    )


def test_each_monitoring_line_says_what_it_counts_and_only_ingestion_is_an_estimate() -> None:
    lines = {line.item: line for line in monitoring.monitoring_costs(2)}
    assert list(lines) == list(ITEMS)
    metrics = watch.custom_metric_count(groups=2)
    assert lines["cloudwatch custom metrics"].basis.startswith(f"{metrics} metrics: ")
    assert "6 of the leaders' own start-up measurements" in lines["cloudwatch custom metrics"].basis
    elastic = {line.item: line for line in monitoring.monitoring_costs(2, elastic=True)}
    assert "leaders' own" not in elastic["cloudwatch custom metrics"].basis
    assert lines["cloudwatch dashboard"].basis.startswith("one dashboard (free if the account")
    assert lines["cloudwatch alarms"].basis.startswith("6 alarms reading 6 metrics")
    # Not-waking and idle-nodes read two metrics each, in place of group-restart and no-metrics.
    assert elastic["cloudwatch alarms"].basis.startswith("6 alarms reading 8 metrics")
    alarm_metric = prices.SERVICES["cloudwatch_alarm_metric_month"].usd
    assert elastic["cloudwatch alarms"].usd_per_month == 8 * alarm_metric
    gb = monitoring.emf_gb_per_month(2)
    assert lines["metrics ingestion"].basis.startswith(f"{gb:.2f} GB a month of EMF events (2 ")
    assert [item for item, line in lines.items() if line.estimate] == ["metrics ingestion"]
