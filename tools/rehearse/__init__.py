"""Offline proof on real vLLM: the stack's group run on this machine's CPU, never in the cloud.

The two-rank rehearsal (`python -m tools.rehearse`), by role; each subpackage imports only the
ones above it in this list, and `checks` (the verdict rows every step returns):
- `group`: the vLLM rank group and what it stands on: `workspace` (the `.rehearsal/` directories,
  the error a step raises, the progress lines), `tiny_checkpoint` (a random-weight Gemma 4 text
  model of the stack's layer layout), `tiny_plan` (the stack's profile -> that model, built once,
  and the planner's plan of it), `ranks` (the ranks' command lines and environment, and
  `RankGroup`, their process groups), `seccomp` (the filter the ranks start under), `endpoint`
  (HTTP to a served `/v1`) and `vllm_logs` (parsers for what vLLM logs about memory and KV cache);
- `front_door`: the gatekeeper run by a real nginx (`gatekeeper_run`) and the rows about the door
  in front of the group: `door_checks`, `share_checks`, `siege_checks`, `chat_page` and
  `vllm_headers`;
- `changes`: a key rotation and a drain under a stream beside a second group (`change_steps`,
  `rotation_step`, `drain_step`, and `balancer`, the Service stand-in the drain moves);
- `measure`: what is measured on the running or a purpose-built group: `metrics_capture`,
  `capacity_step`, `quality_step`, `quantized`, `prefill_probe`, `step_timeout`, and `faults`
  (`--faults`, the group broken on purpose);
- `checks`: one verdict row per promise of the plan, and the verdict table;
- `cli`: the orchestration, its timings and exit codes.

The virtualenvs the rehearsal runs in are built by `tools.venvs`, which `tools.bench` uses too.
"""
