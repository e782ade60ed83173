"""A day of load replayed through the autoscaler as KEDA configures it: groups over time, the
requests the asleep door refused (503, retried after `Retry-After`), the requests whose first
byte came later than the plan's first-byte bound, and the model node-hours billed. Pure and
deterministic: the same day and parameters give the same figures.

The loop, every `STEP_SECONDS`:

- requests arrive as the day's file says (requests per minute, spread evenly over the minute);
  with no group ready the door answers 503 and the client retries after `Retry-After`
  (`wake_seconds`); otherwise the request waits in vLLM's queue until a slot is free and then
  holds it `service_seconds`;
- every `HPA_SYNC_SECONDS` the HPA (Kubernetes 1.3x, pkg/controller/podautoscaler, read
  2026-12-02) computes from the external metric, as the metric stood `metric_lag_seconds` ago:
  a per-group usage ratio within `tolerance` (0.1) of 1 keeps the count, else
  ceil(total / target); the cron floor of the schedule is a second metric, and the larger wins;
  the result is held to [max(1, minGroups), maxGroups]; then stabilised: up to the smallest
  recommendation of the last `up_window_seconds`, down to the largest of the last
  `down_window_seconds` (`stabilizeRecommendationWithBehaviors`). The default rate policies
  (100% or 4 pods per 15 s up, 100% down) never bind at these group counts and are left out;
- every `polling_seconds` KEDA itself (keda v2 pkg/scaling/executor/scale_scaledobjects.go):
  at 0 groups, any active trigger (requests in the queue, the cron window, the door's wake flag)
  sets 1 group; above 0, when no trigger has been active for `cooldown_seconds`, it sets
  `minGroups` (0);
- a new group serves nothing for `cold_start_seconds` (a node launched, the image pulled, the
  group started); its nodes are billed from its start until `node_release_seconds` after it is
  removed (the node autoscaler's unneeded time).

The metric is the queue vLLM reports per group, running plus waiting requests
(`vllm:num_requests_running + vllm:num_requests_waiting`), with the target `queue_per_group`:
with the waiting count alone, a second group empties the queue, the metric falls to 0 and the
group is dropped again once the down window passes.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

STEP_SECONDS = 5
HPA_SYNC_SECONDS = 15
DAY_SECONDS = 24 * 3600


@dataclass(frozen=True)
class Window:
    """The schedule's window on the simulated day (local time), with the groups it holds."""

    start_minute: int
    end_minute: int
    groups_inside: int
    groups_outside: int

    def floor(self, second: float) -> int:
        inside = self.start_minute * 60 <= second < self.end_minute * 60
        return self.groups_inside if inside else self.groups_outside


@dataclass(frozen=True)
class ScalingParams:
    """How the groups scale: KEDA's ScaledObject and the HPA behaviour it writes."""

    min_groups: int
    max_groups: int
    #: Running plus waiting requests per group that the metric targets.
    queue_per_group: int
    schedule: Window | None
    #: From the decision to a group that serves: node, image, start (the slow end, modelled).
    cold_start_seconds: int
    #: The door's `Retry-After`: when a refused client comes back.
    wake_seconds: int
    nodes_per_group: int
    up_window_seconds: int = 0
    down_window_seconds: int = 300
    cooldown_seconds: int = 300
    polling_seconds: int = 30
    tolerance: float = 0.1
    #: The metric's age when the HPA reads it (scrape and query path).
    metric_lag_seconds: int = 30
    #: How long the wake flag stays up after a refused request.
    wake_flag_seconds: int = 60
    #: Nodes are billed this long after their group is gone (Cluster Autoscaler's
    #: `--scale-down-unneeded-time` default, 10 min, plus the drain; modelled).
    node_release_seconds: int = 660
    #: A fixed group that never scales (today's stacks): always ready, never refused.
    fixed: bool = False


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
    metric: list[tuple[float, int]] = field(default_factory=list)  # (second, running+waiting)
    last_active: float = 0.0
    last_refused: float = -1e9
    waits: list[float] = field(default_factory=list)
    refused: set[float] = field(default_factory=set)
    wake_ups: int = 0
    billed: float = 0.0

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


def _metric_at(state: _State, second: float) -> int:
    """The running+waiting count as it stood at `second` (the last sample at or before it)."""
    index = bisect.bisect_right(state.metric, (second, math.inf)) - 1
    return state.metric[index][1] if index >= 0 else 0


def _hpa(state: _State, p: ScalingParams, now: float, current: int) -> int:
    """One HPA sync: the metric's and the schedule's recommendations, held and stabilised."""
    total = _metric_at(state, now - p.metric_lag_seconds)
    ratio = total / (p.queue_per_group * current)
    by_queue = current if abs(ratio - 1) <= p.tolerance else math.ceil(total / p.queue_per_group)
    floor = p.schedule.floor(now) if p.schedule else 0
    wanted = min(max(by_queue, floor, max(1, p.min_groups)), p.max_groups)
    state.history.append((now, wanted))
    keep = now - max(p.up_window_seconds, p.down_window_seconds)
    while state.history and state.history[0][0] <= keep:
        state.history.pop(0)
    up = min(r for t, r in state.history if t > now - p.up_window_seconds or t == now)
    down = max(r for t, r in state.history if t > now - p.down_window_seconds or t == now)
    return min(max(current, up), down)


def _keda(state: _State, p: ScalingParams, now: float, current: int) -> int:
    """KEDA's own poll: from 0 to 1 on any active trigger, back to `minGroups` after the
    cooldown with none."""
    queue = _metric_at(state, now - p.metric_lag_seconds) > 0
    window = bool(p.schedule and p.schedule.floor(now) > 0)
    flag = now - state.last_refused <= p.wake_flag_seconds
    if queue or window or flag or p.min_groups > 0:
        state.last_active = now
        return max(current, 1)
    if current > 0 and now - state.last_active >= p.cooldown_seconds:
        return p.min_groups
    return current


def _serve(state: _State, p: ScalingParams, cap: GroupCapacity, now: float) -> None:
    """Free finished slots, then start queued requests on free ones."""
    while state.busy and state.busy[0] <= now:
        heapq.heappop(state.busy)
    slots = state.ready(now) * cap.slots
    while state.queue and len(state.busy) < slots:
        first, _ = state.queue.popleft()
        state.waits.append(now - first)
        heapq.heappush(state.busy, now + cap.service_seconds)


def _arrive(state: _State, p: ScalingParams, now: float, first: float) -> None:
    """A request (or a retry) at the door."""
    if state.ready(now) == 0 and not p.fixed:
        state.refused.add(first)
        state.last_refused = now
        heapq.heappush(state.retries, (now + p.wake_seconds, first))
        return
    state.queue.append((first, now))


def simulate(
    per_minute: list[int], p: ScalingParams, cap: GroupCapacity, first_byte_s: int
) -> SimResult:
    """Replay the day through the scaler and the groups (see the module doc)."""
    state = _State()
    times = arrivals(per_minute)
    start = p.max_groups if p.fixed else max(p.min_groups, p.schedule.floor(0) if p.schedule else 0)
    state.set_groups(start, -p.cold_start_seconds, p.cold_start_seconds)
    following, now, by_hour = 0, 0.0, [0] * 24
    while now < DAY_SECONDS or state.queue or state.retries or state.busy:
        if now > 2 * DAY_SECONDS:
            raise ValueError("the simulated day did not drain within a second day")
        while following < len(times) and times[following] <= now:
            _arrive(state, p, now, times[following])
            following += 1
        while state.retries and state.retries[0][0] <= now:
            _, first = heapq.heappop(state.retries)
            _arrive(state, p, now, first)
        _serve(state, p, cap, now)
        state.metric.append((now, len(state.busy) + len(state.queue)))
        current = len(state.live())
        if not p.fixed:
            if now % p.polling_seconds == 0:
                wanted = _keda(state, p, now, current)
                state.wake_ups += int(current == 0 and wanted > 0)
                current = wanted
            if current > 0 and now % HPA_SYNC_SECONDS == 0:
                current = _hpa(state, p, now, current)
            state.set_groups(current, now, p.cold_start_seconds)
        if now < DAY_SECONDS:
            hour = int(now // 3600)
            by_hour[hour] = max(by_hour[hour], len(state.live()))
        now += STEP_SECONDS
    return _result(state, p, cap, times, first_byte_s, by_hour)


def _result(
    state: _State,
    p: ScalingParams,
    cap: GroupCapacity,
    times: list[float],
    first_byte_s: int,
    by_hour: list[int],
) -> SimResult:
    waits = sorted(state.waits)
    late = sum(1 for w in waits if w + cap.first_token_seconds > first_byte_s)
    hours = 0.0
    for group in state.groups:
        began = max(0.0, group.ready - p.cold_start_seconds)
        gone = DAY_SECONDS if group.removed is None else group.removed + p.node_release_seconds
        ended = min(DAY_SECONDS, gone)
        hours += max(0.0, ended - began) / 3600 * p.nodes_per_group
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
