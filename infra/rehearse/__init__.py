"""Offline proof on real vLLM: the stack's group run on this machine's CPU, never in the cloud.

The two-rank rehearsal (`python -m infra.rehearse`), in the order a run uses it:
- `workspace`: the `.rehearsal/` directories and the error a step raises;
- `infra.venvs` (outside the package, shared with `infra.bench`): the pinned vLLM CPU
  virtualenv the rehearsal runs in;
- `tiny_model`: a random-weight Gemma 4 text model of the stack's layer layout;
- `tiny`: the stack's profile -> that model, built once, and the planner's plan of it;
- `ranks`: the ranks' command lines and environment, and `RankGroup`, their process groups;
- `endpoint`: HTTP to a served `/v1` (the readiness probe, one streamed reply);
- `vllm_logs`: parsers for the lines vLLM logs about memory and KV cache;
- `checks`: one verdict row per promise of the plan, and the verdict table;
- `cli`: the orchestration, its progress lines, timings and exit codes.

The memory-guard experiment (`python -m infra.rehearse.memory_guard`), the page-cache effect
behind the weight prefetch:
- `cgroups`: memory cgroups as a pod sees them;
- `guard_prediction`: what the planner says vLLM's guard will see;
- `memory_guard`: the two cases and the report.
"""
