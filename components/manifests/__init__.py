"""Pure builders of the model server's Kubernetes objects: no Pulumi, no I/O.

`ModelServer` applies exactly these objects, `python -m infra.plan --render` writes them, and the
rehearsal takes its vLLM command lines from `engine_args`, so all three agree by construction.
They know nothing about stacks: everything arrives in a `ServerSpec`.

One module per object, re-exported here as `manifests.X`:

- `spec`: the `ServerSpec`, shared names, labels and metadata;
- `engine`: one rank's `vllm serve` command line;
- `probes`: the liveness probes and the engine's step bound (`programs`: the files the
  containers run, shipped in one ConfigMap per group);
- `pods`: the leader and worker pod templates (engine container, weight prefetch, volumes);
- `lws`: the LeaderWorkerSet, its per-rank claims' storage class and its disruption budget;
- `drain`: how a pod told to stop finishes its streams (preStop hooks, readiness marker);
- `access`: the namespace, the Secrets, the leaders-only Service and the NetworkPolicy;
- `gate`: the Job that waits until the LeaderWorkerSet webhooks admit objects;
- `quantize`: the one-time Job that writes an int8 or int4 checkpoint to the weights volumes
  (imported only for a stack that makes its own checkpoint, not re-exported).
- `door` (with `asleep`): an elastic stack's always-on front door, out of the group (its
  objects: `door.objects`, not re-exported);
- `gatekeeper` (`frontDoor: gatekeeper` only, not re-exported): nginx in each leader pod, its
  ConfigMap in `gatekeeper_map`.

A new object gets its own module beside these, is re-exported below, and joins `all_objects`
(`infra.adapters.render`, what `--render` writes) in apply order.
"""

from __future__ import annotations

from components.manifests.access import (
    NLB_TAGS_ANNOTATION,
    namespace,
    network_policy,
    secret,
    service,
)
from components.manifests.engine import EngineSpec, command_line, engine_args
from components.manifests.lws import (
    leader_worker_set,
    model_claims,
    pod_disruption_budget,
    rank_pods,
)
from components.manifests.pods import programs_config
from components.manifests.probes import ProbeSpec, engine_timeout_env, probe_command
from components.manifests.spec import (
    API_KEY_KEY,
    ENGINE_KEY_KEY,
    HF_TOKEN_KEY,
    LWS_NAME_LABEL,
    LWS_WORKER_INDEX_LABEL,
    Manifest,
    ServerSpec,
)

__all__ = [
    "API_KEY_KEY",
    "ENGINE_KEY_KEY",
    "HF_TOKEN_KEY",
    "LWS_NAME_LABEL",
    "LWS_WORKER_INDEX_LABEL",
    "NLB_TAGS_ANNOTATION",
    "EngineSpec",
    "Manifest",
    "ProbeSpec",
    "ServerSpec",
    "command_line",
    "engine_args",
    "engine_timeout_env",
    "leader_worker_set",
    "model_claims",
    "namespace",
    "network_policy",
    "pod_disruption_budget",
    "probe_command",
    "programs_config",
    "rank_pods",
    "secret",
    "service",
]
