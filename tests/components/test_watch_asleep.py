"""A planned sleep fires no alarm: an elastic stack with no group, its door answering asleep,
evaluated the way CloudWatch evaluates the stack's alarms (`test_watch`'s store and evaluator)."""

from __future__ import annotations

from components import watch
from components.manifests import gatekeeper
from components.manifests.asleep import ASLEEP_PAGE, Asleep
from components.manifests.metrics import STACK_DIMENSION
from tests import builders
from tests.components import test_watch
from tests.components.test_watch import Store, _alarm_fires, _filter_matches, _log_lines, _record

MINUTES = 30
ASLEEP = Asleep(wake_seconds=370, signal_seconds=30)


def _door_lines(answers: list[tuple[int, int]]) -> list[str]:
    """Access-log lines in the door's own `log_format` (status, asleep); an asleep answer with
    the asleep page's path, as nginx logs it after the internal redirect
    (tests/rehearse/test_asleep_door.py reads a real one)."""
    conf = gatekeeper.nginx_conf(
        builders.gatekeeper_limits(), upstream="gemma-leaders:8000", asleep=ASLEEP
    )
    return [
        line
        for status, asleep in answers
        for line in _log_lines(
            [status],
            conf,
            uri=ASLEEP_PAGE if asleep else "/v1/chat/completions",
            upstream_status="502",
            gatekeeper_asleep=str(asleep),
        )
    ]


def _spec(elastic: bool) -> watch.WatchSpec:
    return test_watch.dev_spec(elastic=elastic, wake_seconds=ASLEEP.wake_seconds)


def _door_minute(store: Store, spec: watch.WatchSpec, minute: int, asleep_answers: int) -> None:
    """One minute of the door's access log through the stack's metric filters: a client
    retrying into `asleep_answers` asleep 503s."""
    events = [
        _record(line, gatekeeper.CONTAINER) for line in _door_lines([(503, 1)] * asleep_answers)
    ]
    patterns = {
        watch.answers_metric(s): watch.answer_filter_pattern(s, spec.elastic)
        for s in watch.ANSWER_CLASSES
    }
    if spec.elastic:
        patterns[watch.ASLEEP_ANSWERS] = watch.asleep_filter_pattern()
    for metric, pattern in patterns.items():
        count = sum(1 for event in events if _filter_matches(pattern, event))
        store.put(spec.namespace, metric, {}, minute, count)


def _group_up(store: Store, spec: watch.WatchSpec, minute: int) -> None:
    """A serving group's leader, scraped once in the minute."""
    waiting = watch.exported_name(watch.WAITING)
    store.put(spec.namespace, waiting, {STACK_DIMENSION: spec.stack}, minute, 0)


def _asleep_night(spec: watch.WatchSpec) -> Store:
    """Half an hour asleep: the door a healthy target every minute and no vLLM metric; in the
    last 6 minutes (inside the planned 370 s wake-up) a client retries every 20 s into the
    door's asleep 503s; then a group wakes (its leader is scraped, its start time appears)."""
    store = Store(minutes=MINUTES)
    door = {"LoadBalancer": spec.load_balancer, "TargetGroup": "targetgroup/k8s/0123"}
    for minute in range(MINUTES):
        store.put("AWS/NetworkELB", "HealthyHostCount", door, minute, 1)
        if minute >= MINUTES - 6:
            _door_minute(store, spec, minute, 3)
    _group_up(store, spec, MINUTES - 1)
    started, dims = watch.exported_name(watch.STARTED), {STACK_DIMENSION: spec.stack}
    for minute in (MINUTES - 2, MINUTES - 1):  # a sleep before, a woken group now
        store.put(spec.namespace, started, dims, minute, 1_764_000_000 + minute)
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
    events = [_record(line, gatekeeper.CONTAINER) for line in _door_lines([(504, 0), (503, 1)])]
    pattern = watch.answer_filter_pattern("5xx", elastic=True)
    assert [_filter_matches(pattern, e) for e in events] == [True, False]
    fixed = watch.answer_filter_pattern("5xx", elastic=False)
    assert [_filter_matches(fixed, e) for e in events] == [True, True]


def _fires_at_any_minute(spec: watch.WatchSpec, store: Store, key: str) -> list[int]:
    """The minutes at whose end the alarm `key` would be in ALARM (CloudWatch evaluates every
    minute, over the periods that end then)."""
    (alarm,) = [a for a in watch.alarms(spec) if a.key == key]
    ends = range(1, store.minutes + 1)
    return [end for end in ends if _alarm_fires(alarm.args, store.until(end))]


def test_a_model_that_does_not_wake_fires_not_waking() -> None:
    """Clients retrying into asleep answers for an hour and no group ever scraped (a crash loop,
    no capacity in the zone): the alarm fires in the minute a whole period without a scrape has
    followed the period that held the first asleep answer (evaluated every minute)."""
    spec = _spec(elastic=True)
    store = Store(minutes=60)
    for minute in range(60):
        _door_minute(store, spec, minute, 1)
    period_min = watch.not_waking_period_s(spec.wake_seconds) // 60
    assert _fires_at_any_minute(spec, store, "not-waking")[0] == period_min + 1


def test_wake_ups_that_come_late_or_night_after_night_do_not_fire_not_waking() -> None:
    """Every 15 minutes a request finds no group; the group comes after 9 minutes (half again
    the planned 370 s), serves for 5 and sleeps again: asleep answers in most periods, never in
    two in a row without a group scraped."""
    spec = _spec(elastic=True)
    store = Store(minutes=120)
    for start in range(0, 120, 15):
        for minute in range(start, min(start + 9, 120)):
            _door_minute(store, spec, minute, 1)
        for minute in range(start + 9, min(start + 14, 120)):
            _group_up(store, spec, minute)
    assert _fires_at_any_minute(spec, store, "not-waking") == []


def test_health_checks_answered_asleep_do_not_count() -> None:
    """An uptime check on /health all night is not a model request: the asleep health page
    does not match."""
    (model,) = _door_lines([(503, 1)])
    health = model.replace(ASLEEP_PAGE, ASLEEP_PAGE + "-health")
    counted = [_record(line, gatekeeper.CONTAINER) for line in (model, health)]
    assert [_filter_matches(watch.asleep_filter_pattern(), e) for e in counted] == [True, False]


def test_the_not_waking_period_sits_past_the_slow_end_of_a_wake_up() -> None:
    for wake in (60, 120, 239, 370, 496, 1200):
        period = watch.not_waking_period_s(wake)
        assert period % 60 == 0 and period >= 300
        # A wake-up half again as slow as planned, and the scrape after it, fit in one period.
        assert period >= 1.5 * wake and period >= wake + 120
