"""The changes rehearsed last, once the stack's group has served every other check: a key
rotation in front of it (`rotation_step`), then a second group started and the drain of the
first group with the second one taking the new requests (`drain_step`). The drain stops the
first group, so nothing may follow it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from infra.plan.sizing import Plan
from tools.rehearse.changes import drain_step, rotation_step
from tools.rehearse.checks import Check, not_reached
from tools.rehearse.front_door import gatekeeper_run
from tools.rehearse.group.endpoint import http_status
from tools.rehearse.group.ranks import RankFailure, RankGroup, RankLaunch, free_port


@dataclass(frozen=True)
class SecondGroup:
    """Group B: its launches (the same command lines on other ports), those ports (HTTP,
    master) and the run's log dir."""

    launches: Sequence[RankLaunch]
    ports: tuple[int, int]
    log_dir: Path


def change_rows(
    group: RankGroup,
    ports: tuple[int, int],
    second: SecondGroup,
    nginx: str,
    tiny_plan: Plan,
    api_key: str,
    timeout_s: float,
) -> list[Check]:
    """The rotation rows, then the drain rows (group A is `group`, on `ports`)."""
    progress = group.progress
    vllm_port, master_port = ports
    if http_status(f"http://127.0.0.1:{vllm_port}/health") != 200:
        return not_reached(
            (*rotation_step.NOT_REACHED, *drain_step.NOT_REACHED), "group A not serving"
        )
    limits = tiny_plan.front_door
    model = tiny_plan.model
    work = second.log_dir / "changes"
    b_port = second.ports[0]
    # The rotation first: a group starting beside it (compiling, warming up) could starve the
    # first group's steps on a small machine.
    checks = rotation_step.rotation_checks(
        nginx, limits, api_key, vllm_port, work / "rotation", model, progress
    )
    progress("changes: starting group B for the drain, at the lowest CPU priority")
    # Both groups' ranks share this machine's cores (each rank's threads on its own core, the
    # same cores for A and B): B at nice 19 cannot hold A's steps past A's stall bound (the
    # tiny plan's 10 s), which would fail A's stream for a reason no cluster has.
    b_group = RankGroup(
        [replace(launch, argv=["nice", "-n", "19", *launch.argv]) for launch in second.launches],
        second.log_dir / "group-b",
        progress=progress,
    )
    with b_group:
        try:
            b_group.wait_ready(f"http://127.0.0.1:{b_port}/health", timeout_s, progress)
        except RankFailure as failure:
            return checks + not_reached(drain_step.NOT_REACHED, failure.summary)
        with (
            gatekeeper_run.running_gate(
                nginx, limits, api_key, free_port(), vllm_port, work / "gate-a", progress
            ) as gate_a,
            gatekeeper_run.running_gate(
                nginx, limits, api_key, free_port(), b_port, work / "gate-b", progress
            ) as gate_b,
        ):
            a = drain_step.GroupA(
                vllm_port=vllm_port,
                master_port=master_port,
                leader_pgid=group.processes[0].pgid,
                worker_pgids=[p.pgid for p in group.processes[1:]],
                gate_run_dir=work / "gate-a" / "run",
                gate_port=int(gate_a.base_url.rsplit(":", 1)[1]),
                gate_pgid=gate_a.pgid,
            )
            checks += drain_step.drain_checks(
                a,
                int(gate_b.base_url.rsplit(":", 1)[1]),
                api_key,
                model,
                tiny_plan.front_door.max_reply_tokens,
                progress,
            )
    return checks
