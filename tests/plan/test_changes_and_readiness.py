"""What the plan says a change costs, the vCPU quota its nodes need, and an unwatched stack."""

from __future__ import annotations

import datetime as dt

import pytest

from infra.adapters.cli import main
from infra.plan import changes, checked, readiness
from infra.plan.config import ConfigError, StackConfig
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack

TODAY = dt.date(2026, 12, 1)


def test_the_plan_says_which_keys_replace_every_node_and_the_node_group(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--stack", "dev"]) == 0
    text = capsys.readouterr().out
    (line,) = [x for x in text.splitlines() if x.startswith("  - node replacement:")]
    # The trade-off chosen: instance tags stay in the launch template (clean-up jobs read them
    # from the instance), so editing them replaces every node; the plan says so.
    for key in ("`owner`", "`endDate`", "`tags`", "`kubernetesVersion`"):
        assert key in line, key
    assert "`instanceType`" not in line
    p = plan(load_stack("dev"), "dev")
    assert f"no answer for ~2 x ({p.cold_start_seconds} s cold start + a node launch)" in line
    # An `instanceType` change is not one node at a time: `instance_types` is ForceNew
    # (hashicorp/terraform-provider-aws internal/service/eks/node_group.go, commit 012e0a32 read
    # 2026-12-03), so the node group is replaced, create before delete; the groups move once, as
    # a group restart.
    (line,) = [x for x in text.splitlines() if x.startswith("  - node group replacement:")]
    assert "`instanceType`:" in line and "one at a time" not in line
    assert "a second node group of the new type is created beside the old one" in line
    (restart,) = [c for c in changes.change_costs(p) if c.kind == "group restart"]
    (moved,) = [c for c in changes.change_costs(p) if c.kind == "node group replacement"]
    assert moved.outage == restart.outage
    assert moved.rollout.startswith(restart.rollout)
    assert "up to 4 nodes" in moved.rollout  # both groups of two, the quota row's peak


def test_each_key_is_in_one_kind_of_change() -> None:
    p = plan(load_stack("dev"), "dev")
    kinds = changes.change_costs(p)
    keys = [k for c in kinds for k in c.keys]
    assert len(keys) == len(set(keys))
    # Every stack key (and the secret key) is classified: a new key must say what it costs.
    stack_keys = {field.alias or name for name, field in StackConfig.model_fields.items()}
    assert set(keys) == stack_keys | {"apiKey", "apiKeyPrevious"}


def test_the_vcpus_needed_hold_a_replacement_s_nodes_and_a_second_node_group() -> None:
    # 2 x m7g.2xlarge (8 vCPUs); EKS adds two nodes while replacing them
    # (managed-node-update-behavior, "Scale up phase": twice the group's one zone), and an
    # `instanceType` change runs a second group of two beside the first: 4 nodes either way.
    assert readiness.vcpus_needed(plan(load_stack("dev"), "dev")) == (16, 32)
    # `instance_types` is ForceNew (the source: the first test) and Pulumi creates the
    # replacement before deleting the old group: both run at full size. Three groups of two
    # nodes: 12 nodes then, more than a node replacement's 6 + 2.
    assert readiness.vcpus_needed(plan(load_stack("dev", {"replicas": 3}), "dev")) == (48, 96)
    assert readiness.peak_nodes(1, 0) == 3  # one node: the replacement's surge is the larger


def test_a_quota_below_the_need_is_refused_in_one_line_and_the_fix_is_accepted() -> None:
    cfg = load_stack("dev", {"vcpuQuota": 31})
    with pytest.raises(ConfigError) as error:
        checked.checked_plan(cfg, "dev", ["vcpuQuota"], TODAY)
    assert str(error.value) == (
        "`vcpuQuota` is 31, but 2 x m7g.2xlarge need 16 vCPUs and 32 while EKS replaces them "
        "or an `instanceType` change runs the old node group beside the new; ask AWS to raise "
        "quota L-1216C47A in us-west-2 to 32 and set `vcpuQuota` to 32"
    )
    accepted = load_stack("dev", {"vcpuQuota": 32})
    assert checked.checked_plan(accepted, "dev", ["vcpuQuota"], TODAY).nodes == 2


def test_a_stack_without_alarm_email_is_told_its_alarms_reach_nobody() -> None:
    assert readiness.warnings(load_stack("dev")) == [
        "`alarmEmail` is not set: the alarms notify an SNS topic nobody subscribes to; set it "
        "to an address such as oncall@example.com, or subscribe to the `alarmTopic` output "
        "yourself"
    ]
    assert readiness.warnings(load_stack("dev", {"alarmEmail": "oncall@example.com"})) == []
    assert readiness.warnings(load_stack("dev", {"monitoring": False})) == []


def test_fewer_replicas_is_not_promised_to_restart_nothing() -> None:
    # A fixed node group's scaling block is sent whole, the desired size with it
    # (hashicorp/terraform-provider-aws internal/service/eks/node_group.go
    # `resourceNodeGroupUpdate`, commit 012e0a32 read 2026-12-03), and the LeaderWorkerSet depends
    # on the node group, so fewer nodes go first, picked without regard to the groups.
    p = plan(load_stack("dev"), "dev")
    kinds = {c.kind: c for c in changes.change_costs(p)}
    assert "replicas" not in kinds["nothing running"].keys
    count = kinds["group count"]
    assert count.keys == ("replicas",)
    assert count.outage.startswith(f"~{p.warm_restart_seconds} s (one restart) on fewer groups")
    assert "restarts once" in count.rollout
    # An elastic stack has no `replicas`: nothing to promise there.
    elastic = plan(load_stack("prod"), "prod")
    (none,) = [c for c in changes.change_costs(elastic) if c.kind == "group count"]
    assert none.outage == "none"
