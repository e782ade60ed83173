"""What a rollout needs and what a drain takes, as the plan says it: surge groups on nodes the
node group can add, their time and cost, the refusals, and the outage of a fixed stack."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import pytest

from infra.plan import changes, checked, prices, readiness, rollout
from infra.plan.config import ConfigError
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack

TODAY = dt.date(2026, 12, 2)


def test_a_fixed_stack_is_told_a_change_is_an_outage_and_how_long() -> None:
    p = plan(load_stack("dev"), "dev")
    assert (p.rollout.grows, p.rollout.surge_groups, p.rollout.max_unavailable) == (False, 0, 1)
    restart = p.warm_restart_seconds
    assert p.rollout.outage_s == p.drain.settle_s + rollout.READY_PERIOD_S + restart
    assert changes.describe_rollout(p.rollout).startswith(
        f"an outage: the one group drains, then restarts, ~{p.rollout.outage_s} s without an answer"
    )
    # Two groups roll one at a time in place: no outage, no extra node.
    two = plan(load_stack("dev", {"replicas": 2}), "dev")
    assert (two.rollout.outage_s, two.rollout.surge_nodes) == (0, 0)


def test_surge_groups_need_nodes_for_their_ranks_and_cost_them_for_the_rollout() -> None:
    d = rollout.plan_drain(600)
    r = rollout.plan_rollout(
        setting="auto",
        grows=True,
        replicas=3,
        stages=2,
        instance_type="m7g.2xlarge",
        cold_start_s=320,
        restart_s=300,
        drain=d,
    )
    assert (r.surge_groups, r.max_unavailable, r.surge_nodes, r.waves) == (1, 0, 2, 3)
    drained = d.accept_s + d.settle_s + rollout.READY_PERIOD_S
    assert r.seconds == rollout.NODE_LAUNCH_S + 320 + 3 * (drained + 300)
    hourly = prices.ec2_price("m7g.2xlarge").usd  # type: ignore[union-attr]
    assert r.surge_usd == round(2 * hourly * r.seconds / 3600, 2)
    assert r.outage_s == 0
    # LWS never surges more groups than there are.
    assert rollout.surge_groups(4, True, 2) == 2


def test_the_grace_is_the_safe_end_of_the_drain() -> None:
    d = rollout.plan_drain(2930)
    assert d.grace_s >= d.reply_s + d.deregistration_delay_s
    assert d.grace_s >= d.accept_s + d.reply_s + d.settle_s
    assert d.unhealthy_draining_s == d.accept_s + d.reply_s
    assert d.deregistration_delay_s <= rollout.MAX_DEREGISTRATION_S
    # The plan's draining interval outlasts a reply accepted at the window's end.
    d = plan(load_stack("dev"), "dev").drain
    assert d.unhealthy_draining_s >= d.accept_s + d.reply_s
    # The window the gatekeeper keeps accepting covers the NLB's detection at its slow end.
    assert d.accept_s >= d.health_check_interval_s * d.health_check_threshold


def test_a_surge_the_node_group_cannot_grow_for_is_refused_and_the_fix_is_accepted() -> None:
    with pytest.raises(ConfigError) as error:
        checked.checked_plan(load_stack("dev", {"rolloutSurge": 1}), "dev", ["rolloutSurge"], TODAY)
    assert str(error.value) == (
        "`rolloutSurge` is 1, but this stack's node group is fixed (no node autoscaler adds "
        "nodes for a surge group, so its pods would wait for ever); set it to 0 or auto (a "
        "change then restarts the groups in place), or make the stack elastic with `maxGroups`"
    )
    fixed = checked.checked_plan(load_stack("dev", {"rolloutSurge": 0}), "dev", [], TODAY)
    assert fixed.rollout.surge_groups == 0


def test_the_quota_must_hold_a_rollout_s_surge_nodes_too() -> None:
    p = plan(load_stack("dev", {"replicas": 2}), "dev")
    surging = replace(
        p,
        rollout=rollout.plan_rollout(
            setting=1,
            grows=True,
            replicas=2,
            stages=p.stages,
            instance_type=p.instance_type,
            cold_start_s=p.cold_start_seconds,
            restart_s=p.warm_restart_seconds,
            drain=p.drain,
        ),
    )
    # 4 nodes of 8 vCPUs, 4 more while an `instanceType` change runs a second node group (more
    # than EKS's 2 while it replaces them), 2 for the surge group.
    assert readiness.vcpus_needed(surging) == (32, 80)
    cfg = load_stack("dev", {"replicas": 2, "vcpuQuota": 79})
    with pytest.raises(ConfigError) as error:
        readiness.check_quota(cfg, surging)
    assert str(error.value) == (
        "`vcpuQuota` is 79, but 4 x m7g.2xlarge need 32 vCPUs and 80 while EKS replaces them "
        "or an `instanceType` change runs the old node group beside the new, and a rollout's 2 "
        "surge node(s) run; ask AWS to raise quota L-1216C47A in us-west-2 to 80 and set "
        "`vcpuQuota` to 80"
    )
    readiness.check_quota(load_stack("dev", {"replicas": 2, "vcpuQuota": 80}), surging)
