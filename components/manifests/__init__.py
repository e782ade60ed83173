"""Pure builders of the model server's Kubernetes objects: no Pulumi, no I/O.

`ModelServer` applies exactly these objects, `python -m infra.plan --render` writes them, and the
rehearsal takes its vLLM command lines from `engine_args`, so all three agree by construction.
They know nothing about stacks: everything arrives in a `ServerSpec`.

One module per object, re-exported here as `manifests.X`:

- `spec`: the `ServerSpec`, shared names, labels and metadata;
- `engine`: one rank's `vllm serve` command line;
- `probes`: the liveness probe program and the engine's step bound;
- `pods`: the leader and worker pod templates (engine container, weight prefetch, volumes);
- `lws`: the LeaderWorkerSet and the storage class of its per-rank claims;
- `access`: the namespace, the Secrets, the leaders-only Service and the NetworkPolicy.

A new object (a front-door proxy's container and config, say) gets its own module beside these,
is re-exported below, and joins `all_objects` in apply order.
"""

from __future__ import annotations

from components.manifests.access import (
    leaders_selector,
    namespace,
    network_policy,
    secret,
    service,
)
from components.manifests.engine import EngineSpec, command_line, engine_args
from components.manifests.lws import leader_worker_set, storage_class
from components.manifests.probes import ProbeSpec, engine_timeout_env, probe_command
from components.manifests.spec import (
    API_KEY_KEY,
    AUTHENTICATED_ANNOTATION,
    CACHE_MOUNT,
    HF_TOKEN_KEY,
    HF_TOKEN_MOUNT,
    LWS_API,
    LWS_NAME_LABEL,
    LWS_WORKER_INDEX_LABEL,
    MODELS_MOUNT,
    RUN_AS,
    Manifest,
    ServerSpec,
)

__all__ = [
    "API_KEY_KEY",
    "AUTHENTICATED_ANNOTATION",
    "CACHE_MOUNT",
    "HF_TOKEN_KEY",
    "HF_TOKEN_MOUNT",
    "LWS_API",
    "LWS_NAME_LABEL",
    "LWS_WORKER_INDEX_LABEL",
    "MODELS_MOUNT",
    "RUN_AS",
    "EngineSpec",
    "Manifest",
    "ProbeSpec",
    "ServerSpec",
    "all_objects",
    "command_line",
    "engine_args",
    "engine_timeout_env",
    "leader_worker_set",
    "leaders_selector",
    "namespace",
    "network_policy",
    "probe_command",
    "secret",
    "service",
    "storage_class",
]


def all_objects(spec: ServerSpec, hf_token: str, api_key: str) -> list[Manifest]:
    """Every object of the model server, in apply order."""
    return [
        namespace(spec),
        secret(spec, "hf-token", hf_token),
        secret(spec, "api-key", api_key),
        network_policy(spec),
        leader_worker_set(spec),
        service(spec),
    ]
