"""What the account and the operator must supply for a stack to run and be watched: the vCPU
quota its nodes need, and someone the alarms reach. Pure; the plan prints it (the quota's line is
the table's, `infra.adapters.table`), the program logs the warnings and refuses a quota the
config says is too small.
"""

from __future__ import annotations

from infra.plan import catalog
from infra.plan.config import ConfigError, StackConfig
from infra.plan.sizing import Plan

#: Service Quotas code of "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
#: counted in vCPUs; Graviton m, c and r types fall under it.
QUOTA_CODE = "L-1216C47A"
#: A node replacement first launches extra nodes: EKS scales the Auto Scaling group up by the
#: larger of twice its zones (one zone here) and maxUnavailable (1 by default)
#: (docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.md, "Scale up
#: phase", read 2026-12-01). The safe end: the most it launches at once.
SURGE_NODES = 2


def peak_nodes(nodes: int, surge_nodes: int) -> int:
    """Model nodes at the peak of a change, for `nodes` running and a rollout's `surge_nodes`.
    Two changes launch extra nodes: EKS's node replacement (`SURGE_NODES` over the running ones),
    and an `instanceType` change, which creates a whole second node group beside the old one
    (`instance_types` is ForceNew, hashicorp/terraform-provider-aws
    internal/service/eks/node_group.go, commit 012e0a32 read 2026-12-03; Pulumi creates the
    replacement first and deletes the old group last, its default): both run at full size until
    the groups have moved. The old group is counted at this plan's type, the only one the plan
    knows. A rollout's surge groups come on top of either (one `pulumi up` can start both)."""
    return max(nodes + SURGE_NODES, 2 * nodes) + surge_nodes


def vcpus_needed(p: Plan) -> tuple[int, int]:
    """(vCPUs the nodes run on, vCPUs at the peak of a change: `peak_nodes`)."""
    per_node = catalog.INSTANCE_TYPES[p.instance_type].vcpu
    return p.nodes * per_node, peak_nodes(p.nodes, p.rollout.surge_nodes) * per_node


def changing(p: Plan) -> str:
    """When the nodes' peak count runs (`peak_nodes`), for the quota's line and its refusal."""
    both = (
        "while EKS replaces them or an `instanceType` change runs the old node group beside the new"
    )
    if p.rollout.surge_nodes:
        return f"{both}, and a rollout's {p.rollout.surge_nodes} surge node(s) run"
    return both


def check_quota(cfg: StackConfig, p: Plan) -> None:
    """Refuse nodes the stated quota cannot launch, at the peak of a change included."""
    if cfg.vcpu_quota is None:
        return
    running, replacing = vcpus_needed(p)
    if cfg.vcpu_quota < replacing:
        raise ConfigError(
            "vcpuQuota",
            f"is {cfg.vcpu_quota}, but {p.nodes} x {p.instance_type} need {running} vCPUs and "
            f"{replacing} {changing(p)}",
            f"ask AWS to raise quota {QUOTA_CODE} in {cfg.region} to {replacing} and set "
            f"`vcpuQuota` to {replacing}",
        )


def warnings(cfg: StackConfig) -> list[str]:
    """What would leave the stack unwatched."""
    if cfg.monitoring and cfg.alarm_email is None:
        return [
            "`alarmEmail` is not set: the alarms notify an SNS topic nobody subscribes to; set "
            "it to an address such as oncall@example.com, or subscribe to the `alarmTopic` "
            "output yourself"
        ]
    return []
