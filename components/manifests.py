"""Pure builders of the model server's Kubernetes objects: no Pulumi, no I/O.

`ModelServer` applies exactly these objects, `python -m infra.plan --render` writes them, and the
rehearsal takes its vLLM command lines from `engine_args`, so all three agree by construction.
They know nothing about stacks: everything arrives in a `ServerSpec`.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

LWS_API = "leaderworkerset.x-k8s.io/v1"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
AUTHENTICATED_ANNOTATION = "gemma-graviton.dev/authenticated"
HF_TOKEN_KEY = "token"
API_KEY_KEY = "api-key"
MODELS_MOUNT = "/models"
CACHE_MOUNT = "/cache"
HF_TOKEN_MOUNT = "/var/run/secrets/huggingface"
RUN_AS = 10001

Manifest = dict[str, Any]


@dataclass(frozen=True)
class EngineSpec:
    """One vLLM rank's command line. The LWS fills the rank fields with LWS's injected variables;
    the rehearsal fills them with loopback values."""

    #: What vLLM loads: a local directory (prefetched) or a hub repository id.
    model: str
    #: The name clients ask for in the OpenAI API.
    served_model_name: str
    pipeline_stages: int
    kv_cache_bytes: int
    max_model_len: int
    max_num_batched_tokens: int
    #: Group size, this rank's index and the leader's address, as text (`$(LWS_GROUP_SIZE)`).
    nnodes: str
    node_rank: str
    master_addr: str
    master_port: int = 29501
    port: int = 8000
    #: Turn off image, audio and video inputs (the model is served text-only).
    text_only: bool = True
    dtype: str = "bfloat16"


def engine_args(spec: EngineSpec, role: Literal["leader", "worker"]) -> list[str]:
    """`vllm serve` arguments for one rank; workers are headless (no HTTP server)."""
    args = [
        "serve",
        spec.model,
        f"--served-model-name={spec.served_model_name}",
        f"--pipeline-parallel-size={spec.pipeline_stages}",
        "--tensor-parallel-size=1",
        f"--nnodes={spec.nnodes}",
        f"--node-rank={spec.node_rank}",
        f"--master-addr={spec.master_addr}",
        f"--master-port={spec.master_port}",
        f"--kv-cache-memory-bytes={spec.kv_cache_bytes}",
        f"--max-model-len={spec.max_model_len}",
        f"--max-num-batched-tokens={spec.max_num_batched_tokens}",
        f"--dtype={spec.dtype}",
        "-cc.mode=2",
        "-cc.backend=eager",
    ]
    if spec.text_only:
        modalities = {"image": 0, "audio": 0, "video": 0}
        args.append(f"--limit-mm-per-prompt={json.dumps(modalities, separators=(',', ':'))}")
    if role == "leader":
        args += ["--host=0.0.0.0", f"--port={spec.port}"]
    else:
        args.append("--headless")
    return args


@dataclass(frozen=True)
class ServerSpec:
    """Everything the model server's objects are built from."""

    #: Base name; every object's name derives from it.
    name: str
    namespace: str
    image: str
    #: Hugging Face repository id of the model.
    model: str
    stages: int
    replicas: int
    pod_memory_gib: float
    pod_cpu: int
    shm_gib: int
    kv_cache_bytes: int
    max_model_len: int
    max_num_batched_tokens: int
    #: Download and read the weights in an init container before the engine starts.
    weight_prefetch: bool
    #: Size of the per-rank model directory (emptyDir limit, or the EBS claim).
    model_volume_gib: int
    #: Keep the weights on a persistent volume claim per rank instead of the node's disk.
    persistent_models: bool
    #: Storage class of the per-rank claims (when `persistent_models`).
    storage_class: str | None
    startup_timeout_seconds: int
    #: Labels of the nodes the model pods must run on.
    node_selector: Mapping[str, str]
    allowed_cidrs: Sequence[str]
    #: ACM certificate for a TLS listener on 443; plain HTTP on 80 without it.
    tls_certificate_arn: str | None = None
    port: int = 8000
    master_port: int = 29501
    extra_labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def lws_name(self) -> str:
        return f"{self.name}-vllm"

    @property
    def hf_secret_name(self) -> str:
        return f"{self.name}-hf-token"

    @property
    def api_key_secret_name(self) -> str:
        return f"{self.name}-api-key"

    @property
    def model_dir(self) -> str:
        return f"{MODELS_MOUNT}/{self.model}"

    def engine(self) -> EngineSpec:
        return EngineSpec(
            model=self.model_dir if self.weight_prefetch else self.model,
            served_model_name=self.model,
            pipeline_stages=self.stages,
            kv_cache_bytes=self.kv_cache_bytes,
            max_model_len=self.max_model_len,
            max_num_batched_tokens=self.max_num_batched_tokens,
            nnodes="$(LWS_GROUP_SIZE)",
            node_rank="$(LWS_WORKER_INDEX)",
            master_addr="$(LWS_LEADER_ADDRESS)",
            master_port=self.master_port,
            port=self.port,
        )


def _labels(spec: ServerSpec, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": spec.name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": "gemma-graviton",
        **spec.extra_labels,
    }


def _meta(spec: ServerSpec, name: str, component: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": spec.namespace, "labels": _labels(spec, component), **extra}


def namespace(spec: ServerSpec) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": spec.namespace, "labels": _labels(spec, "namespace")},
    }


def secret(spec: ServerSpec, which: Literal["hf-token", "api-key"], value: str) -> Manifest:
    """The HF token or the API key. `value` is the real secret in the program, a placeholder in
    rendered files."""
    name, key = (
        (spec.hf_secret_name, HF_TOKEN_KEY)
        if which == "hf-token"
        else (spec.api_key_secret_name, API_KEY_KEY)
    )
    metadata = _meta(spec, name, "credentials")
    # Tells the policy pack the value is a Pulumi secret (policies see secrets decrypted).
    metadata["labels"]["gemma-graviton.dev/secret-source"] = "pulumi-secret"
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "stringData": {key: value},
    }


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
        container["livenessProbe"] = _probe("/health", spec.port, 20, 6)
    else:
        container["command"] = ["/bin/sh", "-c", _WAIT_FOR_LEADER, "vllm"]
        container["args"] = args
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


def _pod_template(spec: ServerSpec, role: Literal["leader", "worker"]) -> dict[str, Any]:
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
    return {"metadata": {"labels": _labels(spec, f"vllm-{role}")}, "spec": pod_spec}


def leader_worker_set(spec: ServerSpec) -> Manifest:
    """`replicas` groups of `stages` pods: rank 0 serves the API, the others are headless."""
    template: dict[str, Any] = {
        "size": spec.stages,
        # A pipeline cannot lose a rank: the gloo group breaks, so the whole group restarts.
        "restartPolicy": "RecreateGroupOnPodRestart",
        "leaderTemplate": _pod_template(spec, "leader"),
        "workerTemplate": _pod_template(spec, "worker"),
    }
    if spec.persistent_models:
        template["volumeClaimTemplates"] = [
            {
                "metadata": {"name": "models"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": spec.storage_class,
                    "resources": {"requests": {"storage": f"{spec.model_volume_gib}Gi"}},
                },
            }
        ]
        template["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": "Delete"}
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": _meta(
            spec,
            spec.lws_name,
            "vllm",
            annotations={
                # pulumi-kubernetes waits until every group serves, within the cold-start budget.
                "pulumi.com/waitFor": "condition=Available",
                "pulumi.com/timeoutSeconds": str(spec.startup_timeout_seconds),
            },
        ),
        "spec": {
            "replicas": spec.replicas,
            # The leader is Ready only after the workers join: LeaderReady would deadlock.
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": template,
        },
    }


def leaders_selector(spec: ServerSpec) -> dict[str, str]:
    """Pods a client may reach: leaders only (worker index "0"); workers serve no HTTP."""
    return {LWS_NAME_LABEL: spec.lws_name, LWS_WORKER_INDEX_LABEL: "0"}


def service(spec: ServerSpec) -> Manifest:
    """An internet-facing NLB (in-tree annotations, handled by EKS's cloud controller)."""
    annotations = {
        "service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
        "service.beta.kubernetes.io/aws-load-balancer-scheme": "internet-facing",
        AUTHENTICATED_ANNOTATION: "true",
    }
    port = {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}
    if spec.tls_certificate_arn:
        annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"] = (
            spec.tls_certificate_arn
        )
        annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-ports"] = "https"
        port = {"name": "https", "port": 443, "targetPort": "http", "protocol": "TCP"}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(spec, spec.name, "endpoint", annotations=annotations),
        "spec": {
            "type": "LoadBalancer",
            "selector": leaders_selector(spec),
            "ports": [port],
            "loadBalancerSourceRanges": list(spec.allowed_cidrs),
            # Keep the client address, so the source ranges apply to the real client.
            "externalTrafficPolicy": "Local",
        },
    }


def network_policy(spec: ServerSpec) -> Manifest:
    """Ranks of a group talk to each other on any TCP port (gloo and vLLM's ZMQ use ephemeral
    ports); everyone else reaches only the leader's HTTP port."""
    group = {"matchLabels": {LWS_NAME_LABEL: spec.lws_name}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(spec, f"{spec.name}-group", "network-policy"),
        "spec": {
            "podSelector": group,
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [{"podSelector": group}]},
                {"ports": [{"port": spec.port, "protocol": "TCP"}]},
            ],
        },
    }


def storage_class(name: str, throughput_mibps: int) -> Manifest:
    """Encrypted gp3 through the EBS CSI driver, bound where the pod lands (the node's zone)."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "gemma-graviton"}},
        "provisioner": "ebs.csi.aws.com",
        "parameters": {"type": "gp3", "encrypted": "true", "throughput": str(throughput_mibps)},
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
        "allowVolumeExpansion": True,
    }


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


def command_line(container: Mapping[str, Any]) -> str:
    """A container's command and args as one shell-quoted line (for display)."""
    return shlex.join([*container.get("command", []), *container.get("args", [])])
