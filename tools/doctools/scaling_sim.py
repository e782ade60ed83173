"""A day of load replayed through the autoscaler as KEDA configures it (`infra.plan.elastic`'s
`ScalerSpec`, the ScaledObject of `components.manifests.scaling`): groups over time, the
requests the asleep door refused (503, retried after `Retry-After`), the requests whose first
byte came later than the plan's first-byte bound, and the model node-hours billed. Pure and
deterministic: the same day and parameters give the same figures.

The loop, every `STEP_SECONDS`:

- requests arrive as the day's file says (requests per minute, spread evenly over the minute);
  each raises the door's wake flag (`components.manifests.asleep`); with no group ready the door
  answers 503 and the client retries after `Retry-After`; otherwise the request waits in vLLM's
  queue until a slot is free and holds it `service_seconds`;
- every `HPA_SYNC_SECONDS` the HPA computes from the queue trigger as it stood `metric_lag_s` ago
  (kubernetes pkg/controller/podautoscaler/replica_calculator.go, external metric with an
  AverageValue target): a usage ratio within `tolerance` of 1 keeps the count, else
  ceil(total / `queue_per_group`); the requests served, ceil(running / `running_per_group`),
  the cron floor and the wake flag (1 while up) are metrics too, and the largest wins; the
  result is held to [max(1, minGroups), maxGroups] and stabilised as horizontal.go
  `stabilizeRecommendationWithBehaviors` does (up to the smallest recommendation of the up
  window, down to the largest of the down window; read 2026-12-02), then the ScaledObject's
  scale-down policy lets one group go a minute;
- every `polling_s` KEDA itself (kedacore/keda pkg/scaling/executor/scale_scaledobjects.go): at
  0 groups, any active trigger (requests waiting or served, the cron window, the wake flag) sets
  1 group;
  above 0, when none has been active for `cooldown_s`, it sets `minGroups`;
- a new group serves nothing for `cold_start_s` (a node, the image, the group's start); its
  nodes are billed from its start until `node_release_s` after it is removed.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from components.manifests.scaling import CronWindow, ScalerSpec
from infra.plan.config_parts import span
from infra.plan.elastic import HPA_SYNC_SECONDS

STEP_SECONDS = 5
DAY_SECONDS = 24 * 3600
#: The ScaledObject's scale-down policy (`components.manifests.scaling`): one group a minute.
DOWN_GROUPS_PER_MINUTE = 1
#: The simulated day's weekday (Monday = 0): the fixture's Wednesday.
WEDNESDAY = 2


def floor(window: CronWindow | None, second: float, weekday: int) -> int:
    """The schedule's groups at `second` of a day that is `weekday`."""
    if window is None:
        return 0
    minute = second // 60
    start, end = span(window.start, window.end)
    inside = weekday in window.weekdays and start <= minute < end
    return window.groups_inside if inside else window.groups_outside


@dataclass(frozen=True)
class DoorFigures:
    """What the door and the node autoscaler add to the scaler's parameters."""

    #: The door's `Retry-After`: when a refused client comes back (`infra.plan.sleep`).
    retry_after_s: int
    #: How long a model request keeps the door's wake flag up (`infra.plan.sleep`).
    wake_flag_s: int
    #: Nodes are billed this long after their group is gone: the Cluster Autoscaler's
    #: `--scale-down-unneeded-time` default (10 min) and a minute of drain (modelled).
    node_release_s: int = 660


@dataclass(frozen=True)
class Scaler:
    """One run's scaler: the plan's parameters (None: today's fixed groups), the door's
    figures, which queue the trigger counts and the day of the week."""

    params: ScalerSpec | None
    door: DoorFigures
    #: Fixed groups when `params` is None.
    fixed_groups: int = 1
    nodes_per_group: int = 2
    weekday: int = WEDNESDAY


@dataclass(frozen=True)
class GroupCapacity:
    """What one group serves: requests at once and one request's time in the engine."""

    slots: int
    service_seconds: float
    #: A request's first byte after it gets a slot (its prefill).
    first_token_seconds: float


@dataclass(frozen=True)
class SimResult:
    """The day's figures."""

    requests: int
    #: Requests refused at least once by the asleep door (503, then retried).
    refused: int
    #: Requests whose first byte came after the first-byte bound (from their first attempt).
    late: int
    p95_wait_seconds: float
    max_wait_seconds: float
    model_node_hours: float
    wake_ups: int
    #: The most groups started in each hour of the day.
    groups_by_hour: tuple[int, ...]


def read_day(path: Path) -> list[int]:
    """Requests per minute, 1,440 of them, from a `minute,requests` file (# comments)."""
    rows = []
    for line in path.read_text().splitlines():
        if line.startswith("#") or not line.strip() or line.startswith("minute"):
            continue
        minute, count = line.split(",")
        rows.append((int(minute), int(count)))
    if [m for m, _ in rows] != list(range(1440)):
        raise ValueError(f"{path}: expected minutes 0..1439 in order")
    return [c for _, c in rows]


def arrivals(per_minute: list[int]) -> list[float]:
    """Each request's arrival second, spread evenly over its minute."""
    return [m * 60 + (k + 0.5) * 60 / n for m, n in enumerate(per_minute) for k in range(n)]


@dataclass
class _Group:
    ready: float
    removed: float | None = None


@dataclass
class _State:
    """The moving parts of one simulated day."""

    #: Every group started, in start order.
    groups: list[_Group] = field(default_factory=list)
    queue: deque[tuple[float, float]] = field(default_factory=deque)  # (first try, this try)
    busy: list[float] = field(default_factory=list)  # heap of slot release times
    retries: list[tuple[float, float]] = field(default_factory=list)  # heap (retry at, first)
    history: list[tuple[float, int]] = field(default_factory=list)  # HPA recommendations
    metric: list[tuple[float, int]] = field(default_factory=list)  # (second, waiting)
    running: list[tuple[float, int]] = field(default_factory=list)  # (second, requests served)
    last_active: float = 0.0
    last_request: float = -1e9
    last_down: float = -1e9
    waits: list[float] = field(default_factory=list)
    refused: set[float] = field(default_factory=set)
    wake_ups: int = 0

    def live(self) -> list[_Group]:
        return [g for g in self.groups if g.removed is None]

    def ready(self, now: float) -> int:
        return sum(1 for g in self.live() if g.ready <= now)

    def set_groups(self, count: int, now: float, cold: int) -> None:
        live = self.live()
        for _ in range(count - len(live)):
            self.groups.append(_Group(now + cold))
        for group in live[count:]:
            group.removed = now  # LWS removes the highest indices


def _metric_at(state: _State, second: float, series: str = "metric") -> int:
    """The queue trigger's count (or `series` "running", the hold trigger's) as it stood at
    `second` (the last sample at or before it)."""
    samples = getattr(state, series)
    index = bisect.bisect_right(samples, (second, math.inf)) - 1
    return samples[index][1] if index >= 0 else 0


def _hpa(state: _State, sc: Scaler, now: float, current: int) -> int:
    """One HPA sync: the queue's, the schedule's and the wake flag's recommendations, held to
    the ScaledObject's bounds, stabilised, then at most `DOWN_GROUPS_PER_MINUTE` down."""
    p = _params(sc)
    total = _metric_at(state, now - p.metric_lag_s)
    ratio = total / (p.queue_per_group * current)
    by_queue = current if abs(ratio - 1) <= p.tolerance else math.ceil(total / p.queue_per_group)
    by_hold = math.ceil(_metric_at(state, now - p.metric_lag_s, "running") / p.running_per_group)
    by_flag = int(now - state.last_request <= sc.door.wake_flag_s)
    by_clock = floor(p.schedule, now, sc.weekday)
    wanted = min(max(by_queue, by_hold, by_flag, by_clock, max(1, p.min_groups)), p.max_groups)
    state.history.append((now, wanted))
    keep = now - max(p.up_window_s, p.down_window_s)
    while state.history and state.history[0][0] <= keep:
        state.history.pop(0)
    up = min(r for t, r in state.history if t > now - p.up_window_s or t == now)
    down = max(r for t, r in state.history if t > now - p.down_window_s or t == now)
    stable = min(max(current, up), down)
    if stable < current:
        if now - state.last_down < 60:
            return current
        state.last_down = now
        return max(stable, current - DOWN_GROUPS_PER_MINUTE)
    return stable


def _keda(state: _State, sc: Scaler, now: float, current: int) -> int:
    """KEDA's own poll: from 0 to 1 on any active trigger, back to `minGroups` after the
    cooldown with none active."""
    p = _params(sc)
    queue = _metric_at(state, now - p.metric_lag_s) > 0
    held = _metric_at(state, now - p.metric_lag_s, "running") > 0
    window = floor(p.schedule, now, sc.weekday) > 0
    flag = now - state.last_request <= sc.door.wake_flag_s
    if queue or held or window or flag or p.min_groups > 0:
        state.last_active = now
        return max(current, 1)
    if current > 0 and now - state.last_active >= p.cooldown_s:
        return p.min_groups
    return current


def _params(sc: Scaler) -> ScalerSpec:
    if sc.params is None:
        raise ValueError("a fixed stack has no scaler")
    return sc.params


def _serve(state: _State, cap: GroupCapacity, now: float) -> None:
    """Free finished slots, then start queued requests on free ones."""
    while state.busy and state.busy[0] <= now:
        heapq.heappop(state.busy)
    slots = state.ready(now) * cap.slots
    while state.queue and len(state.busy) < slots:
        first, _ = state.queue.popleft()
        state.waits.append(now - first)
        heapq.heappush(state.busy, now + cap.service_seconds)


def _arrive(state: _State, sc: Scaler, now: float, first: float) -> None:
    """A keyed model request (or a retry) at the door: it raises the wake flag; with no group
    ready it is refused and comes back after `Retry-After`."""
    state.last_request = now
    if state.ready(now) == 0 and sc.params is not None:
        state.refused.add(first)
        heapq.heappush(state.retries, (now + sc.door.retry_after_s, first))
        return
    state.queue.append((first, now))


def _cold_start(sc: Scaler) -> int:
    return 0 if sc.params is None else sc.params.cold_start_s


def simulate(per_minute: list[int], sc: Scaler, cap: GroupCapacity, first_byte_s: int) -> SimResult:
    """Replay the day through the scaler and the groups (see the module doc)."""
    state = _State()
    times = arrivals(per_minute)
    p = sc.params
    start = sc.fixed_groups if p is None else max(p.min_groups, floor(p.schedule, 0, sc.weekday))
    state.set_groups(start, -_cold_start(sc), _cold_start(sc))
    following, now, by_hour = 0, 0.0, [0] * 24
    while now < DAY_SECONDS or state.queue or state.retries or state.busy:
        if now > 2 * DAY_SECONDS:
            raise ValueError("the simulated day did not drain within a second day")
        while following < len(times) and times[following] <= now:
            _arrive(state, sc, now, times[following])
            following += 1
        while state.retries and state.retries[0][0] <= now:
            _, first = heapq.heappop(state.retries)
            _arrive(state, sc, now, first)
        _serve(state, cap, now)
        state.running.append((now, len(state.busy)))
        state.metric.append((now, len(state.queue)))
        if p is not None:
            _scale(state, sc, p, now)
        if now < DAY_SECONDS:
            hour = int(now // 3600)
            by_hour[hour] = max(by_hour[hour], len(state.live()))
        now += STEP_SECONDS
    return _result(state, sc, cap, times, first_byte_s, by_hour)


def _scale(state: _State, sc: Scaler, p: ScalerSpec, now: float) -> None:
    """KEDA's poll, then the HPA's sync, when each is due."""
    current = len(state.live())
    if now % p.polling_s == 0:
        wanted = _keda(state, sc, now, current)
        state.wake_ups += int(current == 0 and wanted > 0)
        current = wanted
    if current > 0 and now % HPA_SYNC_SECONDS == 0:
        current = _hpa(state, sc, now, current)
    state.set_groups(current, now, p.cold_start_s)


def _result(
    state: _State,
    sc: Scaler,
    cap: GroupCapacity,
    times: list[float],
    first_byte_s: int,
    by_hour: list[int],
) -> SimResult:
    waits = sorted(state.waits)
    late = sum(1 for w in waits if w + cap.first_token_seconds > first_byte_s)
    hours = 0.0
    for group in state.groups:
        began = max(0.0, group.ready - _cold_start(sc))
        gone = DAY_SECONDS if group.removed is None else group.removed + sc.door.node_release_s
        hours += max(0.0, min(DAY_SECONDS, gone) - began) / 3600 * sc.nodes_per_group
    return SimResult(
        requests=len(times),
        refused=len(state.refused),
        late=late,
        p95_wait_seconds=round(waits[int(0.95 * (len(waits) - 1))], 1) if waits else 0.0,
        max_wait_seconds=round(waits[-1], 1) if waits else 0.0,
        model_node_hours=round(hours, 1),
        wake_ups=state.wake_ups,
        groups_by_hour=tuple(by_hour),
    )
