"""The scaling simulation: the HPA's tolerance and windows, KEDA's activation and cooldown, the
cold start and the asleep door's retries, on small days whose answers are known; and the docs'
table is the simulation's output for the shipped stacks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests import builders
from tools.doctools import docs_scaling
from tools.doctools.scaling_sim import (
    DAY_SECONDS,
    DoorFigures,
    GroupCapacity,
    Scaler,
    _hpa,
    _State,
    read_day,
    simulate,
)

CAP = GroupCapacity(slots=10, service_seconds=100, first_token_seconds=20)
#: The builders' zero to three groups of two nodes (tolerance 0.1, polled every 30 s, a 300 s cold
#: start, no window), with shorter windows and a lag of one poll.
PARAMS = builders.scaler_spec(
    queue_per_group=10, up_window_s=0, down_window_s=300, cooldown_s=300, metric_lag_s=30
)
DOOR = DoorFigures(retry_after_s=330, wake_flag_s=60, node_release_s=600)
ELASTIC = Scaler(PARAMS, DOOR)
OFFICE = builders.cron_window()  # weekdays 08:00-19:00 in Berlin, one group inside


def scaler(**changes: object) -> Scaler:
    """`ELASTIC` with some of its parameters changed."""
    return replace(ELASTIC, params=replace(PARAMS, **changes))


def day(**at: int) -> list[int]:
    """A day of zeros but the given minutes (`m135=1`: one request in minute 135)."""
    minutes = [0] * 1440
    for key, count in at.items():
        minutes[int(key[1:])] = count
    return minutes


def test_a_fixed_group_bills_every_hour_and_refuses_nothing() -> None:
    fixed = Scaler(None, DOOR, fixed_groups=1, nodes_per_group=2)
    result = simulate(day(m135=1), fixed, CAP, first_byte_s=600)
    assert result.model_node_hours == 48
    assert (result.refused, result.wake_ups, result.max_wait_seconds) == (0, 0, 0)


def test_an_empty_day_at_zero_groups_costs_nothing() -> None:
    result = simulate(day(), ELASTIC, CAP, first_byte_s=600)
    assert (result.model_node_hours, result.wake_ups, result.requests) == (0, 0, 0)


def test_one_night_request_is_refused_wakes_a_group_and_is_served_on_its_retry() -> None:
    result = simulate(day(m135=1), ELASTIC, CAP, first_byte_s=600)
    assert (result.refused, result.wake_ups) == (1, 1)
    # Refused, then back after Retry-After (330 s), when the group (300 s) is up.
    assert result.max_wait_seconds == 330
    # Billed from the wake to the cooldown's end after the last activity, plus the release.
    hours = result.model_node_hours / 2
    assert 0.25 < hours < 0.5
    assert result.groups_by_hour[2] == 1
    assert result.groups_by_hour[3] == 0


def test_a_wake_slower_than_the_retry_is_refused_again_and_waits_longer() -> None:
    result = simulate(day(m135=1), scaler(cold_start_s=400), CAP, first_byte_s=600)
    assert result.refused == 1
    assert result.max_wait_seconds == 660  # two Retry-Afters
    assert result.late == 1  # 660 s + the 20 s first token is past the 600 s bound


def test_the_schedule_holds_its_groups_inside_the_window_and_none_outside() -> None:
    result = simulate(day(), scaler(schedule=OFFICE), CAP, first_byte_s=600)
    # The group outlives the window by the cooldown, into hour 19.
    assert result.groups_by_hour == (0,) * 8 + (1,) * 12 + (0,) * 4
    # 11 h of two nodes, the 300 s cooldown and the 600 s release after the window.
    assert result.model_node_hours == pytest.approx(2 * (11 + 900 / 3600), abs=0.1)


STEADY = [0] * 60 + [12] * 600 + [0] * 780  # 12/min x 100 s = 20 in the engine: 2 groups


def test_a_hold_of_one_groups_capacity_holds_two_groups_for_a_load_two_groups_serve() -> None:
    """With the hold trigger's target at a group's real capacity (`CAP.slots`), the requests
    served keep the groups that serve them."""
    result = simulate(STEADY, scaler(running_per_group=CAP.slots), CAP, first_byte_s=3600)
    # The first hour also clears what queued during the wake (three groups for a while); then
    # two hold the steady load, and none are left after it.
    assert result.groups_by_hour[:2] == (0, 3)
    assert result.groups_by_hour[2:11] == (2,) * 9
    assert result.groups_by_hour[12:] == (0,) * 12


def test_waiting_alone_starts_and_drops_a_third_group_under_the_same_load() -> None:
    """Two groups empty the queue, the trigger reads 0, one goes, the queue comes back: the
    shipped triggers' churn (the hold keeps one group only), in node-hours and waits, beside a
    hold of one group's capacity."""
    shipped = simulate(STEADY, ELASTIC, CAP, first_byte_s=3600)
    held = simulate(STEADY, scaler(running_per_group=CAP.slots), CAP, first_byte_s=3600)
    assert shipped.groups_by_hour[2:11] == (3,) * 9
    assert shipped.model_node_hours > held.model_node_hours
    assert shipped.p95_wait_seconds > held.p95_wait_seconds


def test_a_long_reply_keeps_its_group_past_the_cooldown() -> None:
    """One request at night whose reply runs 40 minutes: nothing waits and the wake flag lapses,
    but the request served holds the group until it ends; then the cooldown, then zero."""
    long = GroupCapacity(slots=10, service_seconds=2400, first_token_seconds=20)
    result = simulate(day(m120=1), ELASTIC, long, first_byte_s=3600)
    # Woken at 02:00, served on the retry after the cold start, its two nodes billed through the
    # whole reply (without the hold: the flag's 60 s and the cooldown, under an hour in all).
    assert result.wake_ups == 1
    assert result.groups_by_hour[2] == 1 and result.groups_by_hour[4:] == (0,) * 20
    assert result.model_node_hours > 2 * 2400 / 3600


def test_requests_that_never_queue_keep_a_group_through_the_wake_flag() -> None:
    # One request every 2 minutes for an hour at night: nothing ever waits, so the queue
    # trigger never fires; the flag each request raises keeps the group until the last one.
    trickle = day(**{f"m{120 + 2 * i}": 1 for i in range(30)})
    result = simulate(trickle, ELASTIC, CAP, first_byte_s=600)
    # One wake-up; refused only the three that came during its 300 s cold start.
    assert (result.wake_ups, result.refused) == (1, 3)
    assert result.groups_by_hour[2:4] == (1, 1)
    assert result.groups_by_hour[4:] == (0,) * 20


def _state(history: list[tuple[float, int]], total: int) -> _State:
    state = _State()
    state.metric = [(0.0, total)]
    state.history = list(history)
    return state


def test_within_the_tolerance_the_hpa_keeps_the_count() -> None:
    wide = scaler(queue_per_group=20)
    # 21 requests in one group of target 20: 5% over, within the 10% tolerance, stays one
    # (ceil(21 / 20) would be two); 23 is 15% over and becomes two.
    assert _hpa(_state([], 21), wide, 1000, current=1) == 1
    assert _hpa(_state([], 23), wide, 1000, current=1) == 2


def test_the_down_window_holds_the_highest_recent_recommendation() -> None:
    recent = [(800.0, 3)]
    assert _hpa(_state(recent, 0), ELASTIC, 1000, current=3) == 3
    # Past the 300 s window, the low recommendation wins, one group a minute (the policy).
    assert _hpa(_state([(600.0, 3)], 0), ELASTIC, 1000, current=3) == 2


def test_the_up_window_holds_the_lowest_recent_recommendation() -> None:
    cautious = scaler(up_window_s=120)
    assert _hpa(_state([(950.0, 1)], 30), cautious, 1000, current=1) == 1
    assert _hpa(_state([(850.0, 1)], 30), cautious, 1000, current=1) == 3


def test_a_day_file_must_hold_every_minute(tmp_path: Path) -> None:
    short = tmp_path / "day.csv"
    short.write_text("minute,requests\n0,1\n1,2\n")
    with pytest.raises(ValueError, match=r"expected minutes 0\.\.1439 in order"):
        read_day(short)


def test_the_fixture_day_is_a_whole_day() -> None:
    minutes = read_day(docs_scaling.DAY)
    assert len(minutes) * 60 == DAY_SECONDS
    assert sum(minutes) > 0


def test_the_elastic_stack_bills_fewer_node_hours_than_the_fixed_group_without_late_requests() -> (
    None
):
    rows = {label.split(":")[0]: result for label, _, _, _, result in docs_scaling.rows()}
    fixed, elastic = rows["prod before"], rows["prod elastic, as shipped"]
    assert elastic.model_node_hours < fixed.model_node_hours
    assert elastic.late <= fixed.late
    assert elastic.refused > 0  # the night's stray requests meet a sleeping model
