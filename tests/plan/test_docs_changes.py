"""The README's "What a change costs" table is the plans' own figures (docs_changes)."""

from __future__ import annotations

from infra.plan import changes
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from tools.doctools import docs_changes


def test_the_table_has_every_kind_for_every_stack_with_its_rollout() -> None:
    rendered = docs_changes.render()
    for stack in ("dev", "prod"):
        p = plan(load_stack(stack), stack)
        for cost in changes.change_costs(p):
            row = f"| {cost.outage} | {cost.rollout} |"
            assert any(
                line.startswith(f"| {cost.kind} | ") and stack in line.split("|")[2] and row in line
                for line in rendered.splitlines()
            ), (stack, cost.kind)


def test_an_elastic_stack_is_not_promised_no_outage_with_one_group_running() -> None:
    p = plan(load_stack("prod"), "prod")
    (node,) = [c for c in changes.change_costs(p) if c.kind == "node replacement"]
    assert p.replicas >= 2 and p.rollout.grows
    assert "while one group runs" in node.outage
