"""The pod templates of the ranks: the engine container, the weight prefetch, volumes, security.

A container that runs beside the engine (a front-door proxy, say) gets its own module next to this
one and joins the `containers` list in `pod_template`.
"""

from __future__ import annotations

from typing import Any, Literal

from components.manifests.engine import engine_args
from components.manifests.probes import (
    engine_timeout_env,
    liveness_probe,
    probe_command,
    startup_probe,
)
from components.manifests.spec import (
    API_KEY_KEY,
    CACHE_MOUNT,
    HF_TOKEN_KEY,
    HF_TOKEN_MOUNT,
    LWS_NAME_LABEL,
    MODELS_MOUNT,
    RUN_AS,
    ServerSpec,
    object_labels,
)

# Downloads the repository into the model volume, then reads every file once, so the page cache
# is charged to this container's cgroup; it is gone when vLLM's guard measures the engine
# container. On a persistent volume a finished download is only verified.
_PREFETCH = """
set -eu
python3 - <<'PY'
import os, sys, time
from pathlib import Path
from huggingface_hub import snapshot_download

repo, target = os.environ["MODEL_REPO"], Path(os.environ["MODEL_DIR"])
start = time.time()
snapshot_download(repo, local_dir=target, allow_patterns=[
    "*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "tokenizer*"])
print(f"downloaded {repo} in {time.time() - start:.0f} s", flush=True)
start, total = time.time(), 0
for path in sorted(p for p in target.rglob("*") if p.is_file() and ".cache" not in p.parts):
    with open(path, "rb") as handle:
        while chunk := handle.read(64 << 20):
            total += len(chunk)
print(f"read {total / 2**30:.1f} GiB through the page cache in {time.time() - start:.0f} s",
      flush=True)
PY
"""

# Headless ranks start only once the leader's name resolves (LWS #746): vLLM gives up on an
# unresolvable master address instead of retrying.
_WAIT_FOR_LEADER = (
    'until getent hosts "$LWS_LEADER_ADDRESS" >/dev/null; do '
    'echo "waiting for $LWS_LEADER_ADDRESS to resolve"; sleep 2; done; exec vllm "$@"'
)


def _resources(spec: ServerSpec) -> dict[str, dict[str, str]]:
    amount = {"cpu": str(spec.pod_cpu), "memory": f"{spec.pod_memory_gib:g}Gi"}
    return {"requests": dict(amount), "limits": dict(amount)}


def _security_context() -> dict[str, Any]:
    # vLLM's CPU backend binds its OpenMP threads to cores and sets its own memory policy
    # (mbind, set_mempolicy, migrate_pages on itself). The runtime's default seccomp profile
    # admits those syscalls only with CAP_SYS_NICE, which a non-root process cannot hold; on its
    # own pages the syscalls need no capability, so the engine runs unconfined instead.
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "Unconfined"},
    }


def _engine_env(spec: ServerSpec) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "VLLM_CPU_OMP_THREADS_BIND", "value": "auto"},
        {"name": "HOME", "value": CACHE_MOUNT},
        {"name": "XDG_CACHE_HOME", "value": CACHE_MOUNT},
        {"name": "VLLM_CACHE_ROOT", "value": f"{CACHE_MOUNT}/vllm"},
        {"name": "HF_HOME", "value": f"{CACHE_MOUNT}/huggingface"},
        *({"name": k, "value": v} for k, v in engine_timeout_env(spec.probes).items()),
    ]
    if spec.weight_prefetch:
        env.append({"name": "HF_HUB_OFFLINE", "value": "1"})
    else:
        # vLLM downloads the weights itself, into the model volume.
        env += [
            {"name": "HF_HUB_CACHE", "value": MODELS_MOUNT},
            {"name": "HF_TOKEN_PATH", "value": f"{HF_TOKEN_MOUNT}/{HF_TOKEN_KEY}"},
        ]
    return env


def _mounts(spec: ServerSpec, engine: bool) -> list[dict[str, Any]]:
    mounts = [
        {"name": "models", "mountPath": MODELS_MOUNT},
        {"name": "cache", "mountPath": CACHE_MOUNT},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    if engine:
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    if not engine or not spec.weight_prefetch:
        mounts.append({"name": "hf-token", "mountPath": HF_TOKEN_MOUNT, "readOnly": True})
    return mounts


def _prefetch_container(spec: ServerSpec) -> dict[str, Any]:
    return {
        "name": "prefetch-weights",
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c", _PREFETCH],
        "env": [
            {"name": "MODEL_REPO", "value": spec.model},
            {"name": "MODEL_DIR", "value": spec.model_dir},
            {"name": "HF_TOKEN_PATH", "value": f"{HF_TOKEN_MOUNT}/{HF_TOKEN_KEY}"},
            {"name": "HOME", "value": CACHE_MOUNT},
            {"name": "HF_HOME", "value": f"{CACHE_MOUNT}/huggingface"},
            {"name": "HF_HUB_ENABLE_HF_TRANSFER", "value": "0"},
        ],
        "resources": _resources(spec),
        "securityContext": {**_security_context(), "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": _mounts(spec, engine=False),
    }


def _probe(path: str, port: int, period: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": port},
        "periodSeconds": period,
        "failureThreshold": failures,
        "timeoutSeconds": 5,
    }


def _engine_container(spec: ServerSpec, role: Literal["leader", "worker"]) -> dict[str, Any]:
    args = engine_args(spec.engine(), role)
    container: dict[str, Any] = {
        "name": "vllm",
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "env": _engine_env(spec),
        "resources": _resources(spec),
        "securityContext": _security_context(),
        "volumeMounts": _mounts(spec, engine=True),
    }
    if role == "leader":
        # vLLM reads the key from the environment: it stays out of the process's argv. Headless
        # ranks serve no HTTP and do not get it.
        container["env"].append(
            {
                "name": "VLLM_API_KEY",
                "valueFrom": {
                    "secretKeyRef": {"name": spec.api_key_secret_name, "key": API_KEY_KEY}
                },
            }
        )
        container["command"] = ["vllm"]
        container["args"] = args
        container["ports"] = [{"name": "http", "containerPort": spec.port}]
        # /health turns 200 only once every rank has joined and the model is loaded.
        container["startupProbe"] = _probe(
            "/health", spec.port, 10, max(1, spec.startup_timeout_seconds // 10)
        )
        container["readinessProbe"] = _probe("/health", spec.port, 10, 3)
        # /health stays 200 while a lost or hung rank stalls every request: liveness proves
        # tokens come out of the last stage (`probes`).
        container["livenessProbe"] = liveness_probe(
            probe_command(spec.probes, "leader", spec.port, spec.model), spec.probes
        )
    else:
        container["command"] = ["/bin/sh", "-c", _WAIT_FOR_LEADER, "vllm"]
        container["args"] = args
        # A headless rank whose leader is gone waits forever: it fails once the leader stops
        # answering, after the leader's own start-up.
        lost_leader = probe_command(spec.probes, "worker", spec.port, spec.model)
        container["startupProbe"] = startup_probe(lost_leader, spec.startup_timeout_seconds)
        container["livenessProbe"] = liveness_probe(lost_leader, spec.probes)
    return container


def _volumes(spec: ServerSpec) -> list[dict[str, Any]]:
    volumes: list[dict[str, Any]] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{spec.shm_gib}Gi"}},
        {"name": "cache", "emptyDir": {"sizeLimit": "4Gi"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
        {
            "name": "hf-token",
            "secret": {"secretName": spec.hf_secret_name, "defaultMode": 0o440},
        },
    ]
    if not spec.persistent_models:
        volumes.append({"name": "models", "emptyDir": {"sizeLimit": f"{spec.model_volume_gib}Gi"}})
    return volumes


def pod_template(spec: ServerSpec, role: Literal["leader", "worker"]) -> dict[str, Any]:
    """The leader's or a worker's pod: one rank per node, the engine, and the prefetch if any."""
    pod_spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "nodeSelector": dict(spec.node_selector),
        # One rank per node: no two pods of a group share a host.
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {
                            "matchExpressions": [
                                {
                                    "key": LWS_NAME_LABEL,
                                    "operator": "In",
                                    "values": [spec.lws_name],
                                }
                            ]
                        },
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        },
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "fsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "terminationGracePeriodSeconds": 30,
        "containers": [_engine_container(spec, role)],
        "volumes": _volumes(spec),
    }
    if spec.weight_prefetch:
        pod_spec["initContainers"] = [_prefetch_container(spec)]
    return {"metadata": {"labels": object_labels(spec, f"vllm-{role}")}, "spec": pod_spec}
