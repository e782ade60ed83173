"""What watching adds to the plan: its itemised monthly cost, off with `monitoring: false`, and
the alarms' planned thresholds."""

from __future__ import annotations

import datetime as dt

from components import watch
from infra.plan import monitoring, prices
from infra.plan.economics import economics
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack

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
    metrics = watch.custom_metric_count()
    assert on["cloudwatch custom metrics"] == round(metrics * prices.CLOUDWATCH_METRIC_MONTH.usd, 2)
    assert on["cloudwatch dashboard"] == prices.CLOUDWATCH_DASHBOARD_MONTH.usd
    assert on["cloudwatch alarms"] == 5 * prices.CLOUDWATCH_ALARM_METRIC_MONTH.usd
    added = sum(on[item] for item in ITEMS)
    assert 15 < added < 30, added
    shared = {k: v for k, v in on.items() if k not in ITEMS}
    assert shared == off


def test_waiting_threshold_is_the_concurrency_the_kv_cache_holds() -> None:
    cfg = load_stack("dev", today=TODAY)
    p = plan(cfg, "dev")
    auto = monitoring.thresholds("auto", p.max_concurrency, p.replicas)
    assert auto.waiting_requests == int(p.max_concurrency) * p.replicas == 10
    assert monitoring.thresholds(7, p.max_concurrency, p.replicas).waiting_requests == 7
    assert auto.server_errors == monitoring.SERVER_ERRORS_PER_5_MINUTES
