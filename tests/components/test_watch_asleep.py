"""A planned sleep fires no alarm: an elastic stack with no group, its door answering asleep,
evaluated the way CloudWatch evaluates the stack's alarms (`test_watch`'s store and evaluator)."""

from __future__ import annotations

import dataclasses
import re

from components import watch
from components.manifests import gatekeeper
from components.manifests.asleep import Asleep
from components.manifests.metrics import STACK_DIMENSION
from infra.plan import wiring
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from tests.components.test_watch import Store, _alarm_fires, _filter_matches, _record

MINUTES = 30
ASLEEP = Asleep(wake_seconds=370, signal_seconds=30)


def _door_lines(answers: list[tuple[int, int]]) -> list[str]:
    """Access-log lines in the door's own `log_format` (status, asleep), nginx filling them."""
    limits = wiring.gatekeeper_limits(plan(load_stack("prod"), "prod"))
    conf = gatekeeper.nginx_conf(limits, upstream="gemma-leaders:8000", asleep=ASLEEP)
    match = re.search(r"log_format gatekeeper escape=json((?:\s*'[^']*')+);", conf)
    assert match, "the door has no JSON log format"
    template = "".join(re.findall(r"'([^']*)'", match.group(1)))
    lines = []
    for status, asleep in answers:
        values = {
            "time_iso8601": "2026-12-01T22:00:00+00:00",
            "remote_addr": "10.0.1.7",
            "request_method": "POST",
            "uri": "/v1/chat/completions",
            "status": str(status),
            "body_bytes_sent": "230",
            "upstream_addr": "10.100.0.12:8000",
            "upstream_status": "502",
            "request_time": "0.001",
            "gatekeeper_asleep": str(asleep),
        }
        lines.append(re.sub(r"\$(\w+)", lambda m, v=values: v[m.group(1)], template))
    return lines


def _spec(elastic: bool) -> watch.WatchSpec:
    return watch.WatchSpec(
        stack="prod",
        region="us-east-1",
        namespace="gemma-graviton/prod",
        cluster_name="gemma-graviton-prod-eks",
        load_balancer="net/a0123456789abcdef0123456789abcde/0123456789abcdef",
        waiting_threshold=3,
        server_errors_threshold=10,
        elastic=elastic,
    )


def _asleep_night(spec: watch.WatchSpec) -> Store:
    """Half an hour asleep: the door a healthy target every minute, no vLLM metric at all, and
    a client retrying every 20 s into the door's asleep 503s; then a group wakes (its leader's
    start time appears)."""
    store = Store(minutes=MINUTES)
    for minute in range(MINUTES):
        store.put(
            "AWS/NetworkELB",
            "HealthyHostCount",
            {"LoadBalancer": spec.load_balancer, "TargetGroup": "targetgroup/k8s/0123"},
            minute,
            1,
        )
        events = [_record(line, gatekeeper.CONTAINER) for line in _door_lines([(503, 1)] * 3)]
        for status in watch.ANSWER_CLASSES:
            pattern = watch.answer_filter_pattern(status, spec.elastic)
            count = sum(1 for event in events if _filter_matches(pattern, event))
            store.put(spec.namespace, watch.answers_metric(status), {}, minute, count)
    started, dims = watch.exported_name(watch.STARTED), {STACK_DIMENSION: "prod"}
    for minute in (MINUTES - 2, MINUTES - 1):  # a sleep before, a woken group now
        store.put(
            spec.namespace, started, {STACK_DIMENSION: "prod"}, minute, 1_764_000_000 + minute
        )
    store.put(spec.namespace, started, dims, 0, 1_763_000_000)
    return store


def test_a_planned_sleep_fires_no_alarm_of_an_elastic_stack() -> None:
    spec = _spec(elastic=True)
    store = _asleep_night(spec)
    fired = [a.key for a in watch.alarms(spec) if _alarm_fires(a.args, store)]
    assert fired == []


def test_the_same_night_would_fire_a_fixed_stacks_alarms() -> None:
    """The elastic rules are what keep it quiet: with a fixed stack's rules, the asleep 503s
    count as server errors and the wake-up looks like a restart."""
    spec = _spec(elastic=False)
    store = _asleep_night(spec)
    fired = {a.key for a in watch.alarms(spec) if _alarm_fires(a.args, store)}
    assert {"server-errors", "group-restart"} <= fired


def test_the_doors_real_errors_still_count() -> None:
    spec = _spec(elastic=True)
    events = [_record(line, gatekeeper.CONTAINER) for line in _door_lines([(504, 0), (503, 1)])]
    pattern = watch.answer_filter_pattern("5xx", elastic=True)
    assert [_filter_matches(pattern, e) for e in events] == [True, False]
    fixed = watch.answer_filter_pattern("5xx", dataclasses.replace(spec, elastic=False).elastic)
    assert [_filter_matches(fixed, e) for e in events] == [True, True]
