"""The rehearsal's capacity rows: `vllm bench serve`, as `make bench` runs it, against the tiny
group through the gatekeeper, one verdict row per point with the plan beside the measurement.

A short run (seconds): two prompt lengths suited to the tiny model's context (the shorter of
1,000 tokens and half the longest, and the longest prompt the tiny plan admits), at the tiny
plan's concurrency capped at `MAX_CONCURRENCY`, two requests per stream of `OUTPUT_TOKENS`
tokens each. It proves the pieces `make bench` is made of: the generator from the pinned vLLM,
offline with the tiny model's own tokenizer directory, the key through its environment, requests
the gatekeeper lets through, results parsed and set beside the plan. The plan's figures are the
tiny plan's (modelled for the stack's instance type, not this machine), so a row passes on full
replies alone, never on the figures agreeing. The raw results go to the run's log directory.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from infra.plan.config import StackConfig
from infra.plan.sizing import Plan
from tools.bench.capacity import Target, point_argvs, rows_for, run_points
from tools.bench.capacity_plan import SHORT_PROMPT_TOKENS, default_points, longest_prompt
from tools.bench.capacity_table import measured_text, planned_text, render, report
from tools.bench.loadgen import LoadPoint
from tools.rehearse.checks import Check

OUTPUT_TOKENS = 16
PROMPTS_PER_STREAM = 2
MAX_CONCURRENCY = 2

NOT_REACHED = (("capacity (vllm bench serve)", "full replies, beside the plan"),)


@dataclass(frozen=True)
class CapacityRun:
    """What the capacity rows need from the rehearsal: the generator, the tiny model and plan."""

    vllm: str
    """The rehearsal env's `vllm` executable."""
    tokenizer: Path
    """The tiny model's directory (its tokenizer; nothing is fetched from the hub)."""
    cfg: StackConfig
    plan: Plan
    """The tiny model's plan: its context, concurrency, gatekeeper rate and predictions."""
    results: Path
    """Where the generator's raw result JSON and logs go."""


def rehearsal_points(plan: Plan) -> list[LoadPoint]:
    """The short run's points (see the module doc)."""
    longest = longest_prompt(plan, OUTPUT_TOKENS)
    short = min(SHORT_PROMPT_TOKENS, longest // 2)
    conc = min(MAX_CONCURRENCY, plan.front_door.client_concurrent_requests)
    return default_points(plan, OUTPUT_TOKENS, PROMPTS_PER_STREAM, (short, longest), (conc,))


def capacity_checks(
    run: CapacityRun, gate_url: str, api_key: str, log: Callable[[str], None]
) -> list[Check]:
    """Run the points through the gatekeeper at `gate_url` (its `/v1`), log the table, and
    return one row per point."""
    points = rehearsal_points(run.plan)
    run.results.mkdir(parents=True, exist_ok=True)
    target = Target(gate_url.removesuffix("/v1"), run.plan.model, str(run.tokenizer))
    argvs = point_argvs(run.vllm, points, target, str(run.results))
    # Offline: the tokenizer is the tiny model's directory, and nothing may reach the hub.
    results = run_points(
        points, argvs, api_key, run.results, log, extra_env={"HF_HUB_OFFLINE": "1"}
    )
    rows = rows_for(run.cfg, run.plan, points, results)
    (run.results / "capacity.json").write_text(
        json.dumps(report(rows), indent=2) + "\n", encoding="utf-8"
    )
    for line in render(rows, "capacity: the tiny plan beside vllm bench serve").splitlines():
        log(line)
    return [
        Check(
            f"capacity {row.point.input_tokens} tok x{row.point.concurrency}",
            f"plan: {planned_text(row.predicted)}",
            measured_text(row.measured, row.point),
            row.measured is not None and row.measured.ok,
            note="; ".join(row.measured.errors) if row.measured is not None else "",
        )
        for row in rows
    ]
