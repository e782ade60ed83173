"""The elasticity keys and the elastic plan: exact refusals through the CLI (each fix accepted),
the scaling parameters KEDA gets, and the cost, quota and wake-up figures."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from typing import Any

import pytest

from infra.adapters.cli import main
from infra.plan import elastic
from infra.plan.config import ConfigError
from infra.plan.stackfile import load_stack
from tests import builders
from tools.doctools import scaling_sim

TODAY = dt.date(2026, 12, 2)
OFFICE = '{timeZone: Europe/Berlin, days: Mon-Fri, start: "08:00", end: "19:00"}'
ELASTIC = ["minGroups=0", "maxGroups=3", f"schedule={OFFICE}"]
NUMBER_END = OFFICE.replace('"19:00"', "1900")

# (--set values on dev, exact message, the values with the message's fix applied).
REFUSALS = [
    (
        ["minGroups=0"],
        "`maxGroups` is required with `minGroups`; set it to 1",
        ["minGroups=0", "maxGroups=1"],
    ),
    (
        ["maxGroups=3"],
        "`minGroups` is required with `maxGroups`; set it to 0 (no group while nothing asks) or 1",
        ["maxGroups=3", "minGroups=0"],
    ),
    (
        ["minGroups=1", "maxGroups=1"],
        "`maxGroups` 1 is not above `minGroups` 1, so the group count is fixed; lower `minGroups` "
        "to 0, or set `maxGroups` to 2, which holds one group all month, or use `replicas: 1` "
        "without elasticity keys",
        ["minGroups=0", "maxGroups=1"],
    ),
    # A mistyped floor: raising `maxGroups` to 4 would hold 3 groups (6 nodes) all month, so
    # lowering `minGroups` comes first and the raise says what it holds.
    (
        ["minGroups=3", "maxGroups=1"],
        "`maxGroups` 1 is not above `minGroups` 3, so the group count is fixed; lower `minGroups` "
        "to 0, or set `maxGroups` to 4, which holds 3 groups all month, or use `replicas: 1` "
        "without elasticity keys",
        ["minGroups=0", "maxGroups=1"],
    ),
    (
        ["minGroups=0", "maxGroups=2", "replicas=2"],
        "`replicas` fixes the number of groups, but `maxGroups` and `minGroups` make it follow "
        "the queue; remove `replicas`, or remove the elasticity keys",
        ["minGroups=0", "maxGroups=2"],
    ),
    (
        ["queuePerGroup=4"],
        "`minGroups` is required with `queuePerGroup`; set it to 0 (no group while nothing asks) "
        "or 1",
        ["queuePerGroup=4", "minGroups=0", "maxGroups=1"],
    ),
    (
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE.replace('Berlin', 'Berln')}"],
        "`schedule.timeZone` 'Europe/Berln' is not an IANA time zone name; use Europe/Berlin",
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE}"],
    ),
    # A name with no really close spelling is not told to use the nearest one (difflib's
    # default cutoff 0.6 gave Europe/Athens); the message names how to list the IANA names.
    (
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE.replace('Berlin', 'Atlantis')}"],
        "`schedule.timeZone` 'Europe/Atlantis' is not an IANA time zone name; use one such as "
        'Europe/Berlin (`python -c "import zoneinfo; print(sorted(zoneinfo.available_timezones()))'
        '"` lists them)',
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE}"],
    ),
    (
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE.replace('Berlin', 'berlin')}"],
        "`schedule.timeZone` 'Europe/berlin' is not an IANA time zone name; use Europe/Berlin",
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE}"],
    ),
    (
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE.replace('Mon-Fri', 'Fri-Mon')}"],
        "`schedule.days` 'Fri-Mon' is not a list of days (Mon to Sun, ranges forward); write "
        "them as Mon-Fri or Mon,Wed,Fri",
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE}"],
    ),
    (
        ["minGroups=0", "maxGroups=2", f"schedule={NUMBER_END}"],
        "`schedule.end` '1900' is not a time of day as HH:MM; write it as \"19:00\"",
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE}"],
    ),
    (
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE.replace('19:00', '07:00')}"],
        "`schedule.end` 07:00 is not after `schedule.start` 08:00 (a window ends the day it "
        'starts); use an end such as "23:59", or "00:00" for midnight',
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE.replace('19:00', '23:59')}"],
    ),
    # The end of the day is not told to write "19:00": both fixes it offers are accepted.
    (
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE.replace('19:00', '24:00')}"],
        "`schedule.end` '24:00' is not a time of day as HH:MM (00:00 to 23:59); write \"23:59\" "
        'for a minute before midnight, or "00:00", which as an end means midnight, the start of '
        "the next day",
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE.replace('19:00', '23:59')}"],
    ),
    (
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE.replace('19:00', '24:00')}"],
        "`schedule.end` '24:00' is not a time of day as HH:MM (00:00 to 23:59); write \"23:59\" "
        'for a minute before midnight, or "00:00", which as an end means midnight, the start of '
        "the next day",
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE.replace('19:00', '00:00')}"],
    ),
    (
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE[:-1]}, groupsInside: 3}}"],
        "`schedule.groupsInside` 3 is above `maxGroups` 2; use 2 or fewer, or raise `maxGroups`",
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE[:-1]}, groupsInside: 2}}"],
    ),
    (
        ["minGroups=1", "maxGroups=2", f"schedule={OFFICE[:-1]}, groupsInside: 1}}"],
        "`schedule.groupsInside` 1 is not above `minGroups` 1, so the window holds nothing more "
        "than the rest of the week; use 2, or remove `schedule`",
        ["minGroups=1", "maxGroups=2", f"schedule={OFFICE[:-1]}, groupsInside: 2}}"],
    ),
    (
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE[:-1]}, groupsOutside: 1}}"],
        "`schedule.groupsOutside` 1 differs from `minGroups` 0: outside the window the floor is "
        "`minGroups`; set it to 0, or leave it out",
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE[:-1]}, groupsOutside: 0}}"],
    ),
    (
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE[:-1]}, weekend: true}}"],
        "`schedule.weekend` is not a field of the schedule; remove it (timeZone, days, start, "
        "end, groupsInside, groupsOutside)",
        ["minGroups=0", "maxGroups=2", f"schedule={OFFICE}"],
    ),
    # The model node group's maximum is fixed (a changed maximum sends a stale desired size,
    # hashicorp/terraform-provider-aws internal/service/eks/node_group.go
    # `resourceNodeGroupUpdate`, commit 012e0a32): a stack that needs more nodes is refused.
    (
        ["minGroups=0", "maxGroups=16", "pipelineStages=8"],
        "`maxGroups` is 16, but its groups of 8 node(s) need 138 model nodes with their surge, "
        "above the model node group's fixed maximum of 100 (infra/plan/elastic.py "
        "MODEL_NODES_CEILING); use `maxGroups: 11` or fewer",
        ["minGroups=0", "maxGroups=11", "pipelineStages=8"],
    ),
    (
        [*ELASTIC, "vcpuQuota=60"],
        "`maxGroups` 3 groups need 116 vCPUs (6 x m7g.2xlarge, 14 at the peak of a change: a "
        "node replacement's or an `instanceType` change's extra nodes and a rollout's surge; and "
        "the system nodes), above `vcpuQuota` 60; use `maxGroups: 1`, or ask AWS to raise quota "
        "L-1216C47A to 116",
        [*ELASTIC[:1], "maxGroups=1", "vcpuQuota=60"],
    ),
]


def _argv(values: list[str]) -> list[str]:
    return ["--stack", "dev", *(a for v in values for a in ("--set", v))]


@pytest.mark.parametrize(("values", "message", "fixed"), REFUSALS, ids=lambda v: str(v)[:40])
def test_bad_elasticity_keys_name_key_rule_and_an_accepted_fix(
    values: list[str], message: str, fixed: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_argv(values), today=TODAY) == 2
    assert capsys.readouterr().err.strip() == f"error: {message}"
    assert main([*_argv(fixed), "--brief"], today=TODAY) == 0, capsys.readouterr().err


def test_the_time_zone_listing_the_message_names_runs_and_lists_the_example() -> None:
    message = next(m for _, m, _ in REFUSALS if "Atlantis" in m)
    command = message.split("`python -c ", 1)[1].split("` lists", 1)[0].strip('"')
    done = subprocess.run(
        [sys.executable, "-c", command], capture_output=True, text=True, check=True
    )
    assert "'Europe/Berlin'" in done.stdout and "'Europe/Atlantis'" not in done.stdout


def _elastic(**overrides: Any) -> tuple[Any, Any, elastic.ElasticPlan]:
    values = {
        "minGroups": 0,
        "maxGroups": 3,
        "schedule": {"timeZone": "Europe/Berlin", "start": "08:00", "end": "19:00"},
        **overrides,
    }
    cfg, p = builders.planned("dev", values, TODAY)
    e = elastic.elastic_plan(cfg, p, TODAY)
    assert e is not None
    return cfg, p, e


def test_a_time_read_as_a_number_is_refused() -> None:
    schedule = {"timeZone": "Europe/Berlin", "start": 480, "end": "19:00"}
    with pytest.raises(ConfigError) as refused:
        load_stack("dev", {"minGroups": 0, "maxGroups": 2, "schedule": schedule}, TODAY)
    assert str(refused.value) == (
        "`schedule.start` 480 was read as a number, not a time of day; quote it as HH:MM, such "
        'as "08:00"'
    )


def test_the_plan_is_sized_for_the_most_groups_and_scaling_follows_it() -> None:
    _, p, e = _elastic()
    assert (p.replicas, p.nodes) == (3, 3 * p.stages)
    assert e.model_nodes_max == p.nodes + 2 + p.rollout.surge_nodes
    s = e.scaling
    assert (s.min_groups, s.max_groups, s.nodes_per_group) == (0, 3, p.stages)
    # auto: the full-length requests one group's KV cache holds at once.
    assert s.queue_per_group == int(p.max_concurrency) >= 1
    # A group is never dropped within one start-up.
    assert s.down_window_s >= s.cold_start_s and s.cooldown_s == s.down_window_s
    assert s.down_window_s % 60 == 0 and s.down_window_s >= 300
    assert s.tolerance == 0.1 and s.up_window_s < s.down_window_s
    assert s.schedule is not None
    assert s.schedule.crons() == ("0 8 * * 1,2,3,4,5", "0 19 * * 1,2,3,4,5")
    assert (s.schedule.time_zone, s.schedule.groups_inside) == ("Europe/Berlin", 1)
    _, _, fixed_queue = _elastic(queuePerGroup=2)
    assert fixed_queue.scaling.queue_per_group == 2


def test_weekend_days_map_to_cron_sunday_zero() -> None:
    _, _, e = _elastic(
        schedule={"timeZone": "UTC", "days": "Sat-Sun", "start": "10:00", "end": "12:30"}
    )
    assert e.scaling.schedule is not None
    window = e.scaling.schedule
    assert (window.time_zone, *window.crons()) == ("UTC", "0 10 * * 6,0", "30 12 * * 6,0")
    assert e.scaling.schedule.hours_a_week == 5


def test_a_window_ending_at_midnight_ends_on_the_next_day() -> None:
    """An end at "00:00" is the next day's midnight: KEDA's end cron names the following days
    (Sun's window ends Mon 00:00), the week counts the hours to midnight, and the simulated day
    holds the groups until then."""
    _, _, e = _elastic(
        schedule={"timeZone": "UTC", "days": "Fri-Sun", "start": "18:00", "end": "00:00"}
    )
    window = e.scaling.schedule
    assert window is not None
    assert window.crons() == ("0 18 * * 5,6,0", "0 0 * * 6,0,1")
    assert window.hours_a_week == 18
    assert scaling_sim.floor(window, 23 * 3600 + 3599, 4) == window.groups_inside
    assert scaling_sim.floor(window, 17 * 3600, 4) == window.groups_outside


def test_wake_up_from_zero_uses_the_cold_start_model() -> None:
    _, p, e = _elastic()
    # Without the volume the wake-up downloads the checkpoint: the plan's own cold start, plus a
    # node and the image.
    assert e.wake_without_volume_s == pytest.approx(
        p.cold_start_seconds + elastic.NODE_READY_SECONDS + 7 * 1024**3 / 140e6, abs=1
    )
    assert e.wake_with_volume_s < e.wake_without_volume_s
    assert e.scaling.cold_start_s == e.wake_without_volume_s  # dev: modelCache none
    _, _, with_volume = _elastic(modelCache="volume")
    assert with_volume.scaling.cold_start_s == with_volume.wake_with_volume_s


def test_costs_rise_from_fewest_to_schedule_to_most() -> None:
    cfg, p, e = _elastic()
    assert e.usd_month_fewest is not None and e.usd_month_most is not None
    assert e.usd_month_schedule is not None
    assert e.usd_month_fewest < e.usd_month_schedule < e.usd_month_most
    # The schedule's month is the fewest plus one group's share of 55 of 168 hours.
    one = elastic.month_usd(cfg, p, 1, TODAY)
    assert one is not None and e.usd_month_fewest < one < e.usd_month_most
    share = (one - e.usd_month_fewest) * 55 / 168
    assert e.usd_month_schedule == pytest.approx(e.usd_month_fewest + share, abs=0.02)


def test_system_group_holds_the_system_pods_and_survives_a_drain() -> None:
    cfg, _, e = _elastic()
    assert e.system.instance_type == "m7g.large" and e.system.nodes >= 2
    names = " ".join(e.system.pods)
    for pod in ("coredns", "lws-controller", "keda-operator", "cluster-autoscaler", "door"):
        assert pod in names
    assert "ebs-csi-controller" not in names  # dev has no volumes
    volumes = elastic.system_group(cfg.model_copy(update={"model_cache": "volume"}))
    assert volumes.millicpu > e.system.millicpu


def test_quota_at_the_most_counts_surge_and_system_nodes() -> None:
    cfg, p, e = _elastic()
    # An `instanceType` change runs a second node group beside the first (instance_types is
    # ForceNew, hashicorp/terraform-provider-aws internal/service/eks/node_group.go, commit
    # 012e0a32; create before delete): with 6 nodes that is more than a node replacement's 2
    # surge nodes; a rollout's surge group comes on top of either.
    assert 2 * p.nodes > p.nodes + 2
    assert e.vcpus_at_most == (2 * p.nodes + p.rollout.surge_nodes) * 8 + e.system.nodes * 2
    assert p.rollout.surge_nodes == 2
    elastic.check_quota(cfg.model_copy(update={"vcpu_quota": e.vcpus_at_most}), p)
    with pytest.raises(ConfigError) as refused:
        elastic.check_quota(cfg.model_copy(update={"vcpu_quota": e.vcpus_at_most - 1}), p)
    assert refused.value.key == "maxGroups" and "use `maxGroups: 2`" in str(refused.value)


def test_prod_ships_elastic_with_its_rows_and_dev_fixed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--stack", "prod"], today=TODAY) == 0
    out = capsys.readouterr().out
    for row in (
        "cost, fewest groups",
        "cost, most groups",
        "cost, schedule month",
        "vcpu quota at most",
        "wake-up from zero",
        "system nodes",
    ):
        assert row in out
    assert main(["--stack", "prod", "--json"], today=TODAY) == 0
    data = json.loads(capsys.readouterr().out)
    scaling = data["elastic"]["scaling"]
    assert (scaling["min_groups"], scaling["max_groups"]) == (0, 3)
    assert scaling["schedule"]["groups_inside"] == 1
    assert scaling["schedule"]["groups_outside"] == 0
    assert main(["--stack", "dev", "--json"], today=TODAY) == 0
    assert json.loads(capsys.readouterr().out)["elastic"] is None
