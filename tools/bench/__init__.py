"""Measuring a deployed endpoint with well-kept tools.

Capacity and the smoke test are `python -m tools.bench.capacity` (`make bench`, `--quick`) with
the pinned vLLM's own `vllm bench serve`: `loadgen` (the generator's command line and results),
`capacity_plan` (the points and the plan's predictions), `capacity_table` (the two side by side),
`loadtest_job` (the same run as an in-cluster Job) and `capacity` (the run, exit codes). Quality
is `python -m tools.bench.quality` with lm-evaluation-harness. `args` finds the endpoint and key
both use.
"""
