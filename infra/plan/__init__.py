"""The planner: stack file -> validated config -> plan. Pure: no Pulumi, no I/O beyond reading a
stack file, so the program, the CLIs and the tests share one source of truth; `infra.adapters`
turns a plan into the components' arguments, its Kubernetes objects and the plan command's text.

- `catalog`: instance types and model layouts (add a new instance type or model here);
- `config`: the stack config model, its defaults and cross-field rules (add a stack key here);
- `kv_cache`: vLLM 0.31's KV block accounting;
- `budget`: a node's room for a pod, each rank's weights and runtime, the KV bytes and batch size;
- `sizing`: node size -> pod memory, KV bytes, context, batch tokens, or a refusal;
- `stackfile`: reading `stacks/Pulumi.<stack>.yaml` and `--set` overrides.
"""
