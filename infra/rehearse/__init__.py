"""Offline proof on real vLLM: the stack's group run on this machine's CPU, never in the cloud.

- `env`: the pinned vLLM CPU virtualenv the rehearsal runs in;
- `tiny_model`: a random-weight Gemma 4 text model of the stack's layer layout;
- `vllm_logs`: parsers for the lines vLLM logs about memory and KV cache;
- `cli`: `python -m infra.rehearse`, the two-rank group held against the planner;
- `memory_guard`: `python -m infra.rehearse.memory_guard`, the page-cache experiment behind the
  weight prefetch.
"""
