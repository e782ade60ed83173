"""The benchmark client: measures a deployed endpoint as the field report did
(`python -m tools.bench`).

The modules follow the run's data flow:

- `args`: the command line and the target (flags, environment, `pulumi stack output`);
- `client`: streamed fixed-length requests, their timings and the verdict on each reply;
- `stats`: median and spread;
- `report`: the JSON report built from the rounds, and the table rendered from it;
- `cli`: `run_bench` (every level and round) and `main` (exit codes).

That client is the smoke test. Capacity is measured by `python -m tools.bench.capacity` (`make
bench`) with `vllm bench serve`: `loadgen` (the generator's command line and results),
`capacity_plan` (the points and the plan's predictions), `capacity_table` (the two side by side)
and `capacity` (the run, the in-cluster Job, exit codes).

The names below are the package's interface for other tools (the rehearsal runs the benchmark
against its local leader through them).
"""

from tools.bench.args import BenchArgs, UsageError, parse_args
from tools.bench.cli import main, run_bench
from tools.bench.client import BenchError, RequestRecord, RoundResult, run_request
from tools.bench.report import build_report, render_table

__all__ = [
    "BenchArgs",
    "BenchError",
    "RequestRecord",
    "RoundResult",
    "UsageError",
    "build_report",
    "main",
    "parse_args",
    "render_table",
    "run_bench",
    "run_request",
]
