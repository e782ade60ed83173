"""The pod templates of the ranks: the engine container, the weight prefetch, volumes, security.

The leader also runs the gatekeeper (`components.manifests.gatekeeper`), the pod's only open
port; vLLM listens on loopback and the kubelet's probes reach its /health through the gatekeeper.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from components.manifests import drain, programs
from components.manifests.engine import engine_args
from components.manifests.probes import (
    LIVENESS_PORT,
    LOGGING_CONFIG_PATH,
    check_args,
    engine_command,
    engine_logging_config,
    engine_timeout_env,
    leader_startup_probe,
    liveness_probe,
    startup_probe,
)
from components.manifests.spec import (
    API_KEY_KEY,
    CACHE_MOUNT,
    ENGINE_CONTAINER,
    ENGINE_KEY_KEY,
    FRONT_DOOR_LABEL,
    GATEKEEPER_PORT,
    GATEKEEPER_PROBE_PORT,
    HF_TOKEN_KEY,
    HF_TOKEN_MOUNT,
    LWS_NAME_LABEL,
    MODELS_MOUNT,
    PREFETCH_CONTAINER,
    QUEUE_SOURCE_LABEL,
    RUN_AS,
    ServerSpec,
    config_digest,
    object_labels,
    object_meta,
    pod_security_context,
    toleration,
)

# The weight prefetch (`programs/prefetch.py`) downloads the pinned commit into the model volume,
# then reads every file once, so the page cache is charged to this container's cgroup; it is gone
# when vLLM's guard measures the engine container. On a persistent volume a finished download is
# only verified; a checkpoint the quantize Job wrote (`components.manifests.quantize`) is not
# downloaded: its marker must be there (the Job writes it last), then every file is read once.
#: The marker the quantize Job writes last into each volume (`components.manifests.quantize`).
CHECKPOINT_MARKER = "quantized.json"
#: Download attempts before the init container gives up (back-off 15 s doubling, at most 300 s:
#: about 12 minutes of retrying in all).
DOWNLOAD_ATTEMPTS = 6

#: The annotation over the programs ConfigMap's files: a new program rolls the group (the kubelet
#: refreshes a mounted ConfigMap, but each container's check process runs what it started with).
PROGRAMS_ANNOTATION = "gemma-graviton.dev/programs-digest"
#: vLLM's key check on every route where it listens on the pod network (`programs/key_check.py`,
#: on PYTHONPATH).
KEY_CHECK_MODULE = "key_check.KeyCheck"


def _programs(spec: ServerSpec) -> dict[str, str]:
    """The programs' files, with the key check where vLLM checks the key itself."""
    return programs.files(key_check=not spec.gatekeeper_in_pod)


def programs_config_name(spec: ServerSpec) -> str:
    """Named by the programs' digest: a pod mounts exactly the files of its own template."""
    return f"{spec.name}-programs-{config_digest(_programs(spec))[:10]}"


def programs_config(spec: ServerSpec) -> dict[str, Any]:
    """The programs the ranks' containers run (`components.manifests.programs`): the engine's
    entry, its liveness check, its preStop and the weight prefetch, once per group. Immutable
    and named by digest: a change makes a new ConfigMap, and the groups still on the old
    template (a rollout takes one group at a time) keep mounting the old one, never a new
    `drain.py` with an old template's arguments. The program keeps the old one on Pulumi's
    replacement (`retain_on_delete`); it goes with the namespace."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(spec, programs_config_name(spec), "programs"),
        "immutable": True,
        "data": _programs(spec),
    }


def memory_quantity(gib: float) -> str:
    """`gib` as the API server writes it back: whole GiB as `26Gi`, else whole MiB (`26432Mi`,
    rounded down). A LeaderWorkerSet's webhook patch re-encodes the pod template's quantities
    (controller-runtime's defaulter), and pulumi-kubernetes does not normalize a custom
    resource's inputs, so `25.8125Gi` would read as a change on the next preview."""
    mib = math.floor(gib * 1024)
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def _resources(spec: ServerSpec) -> dict[str, dict[str, str]]:
    amount = {"cpu": str(spec.pod_cpu), "memory": memory_quantity(spec.pod_memory_gib)}
    return {"requests": dict(amount), "limits": dict(amount)}


def container_security_context() -> dict[str, Any]:
    """The security context every container of the project's pods runs with."""
    # The runtime's default seccomp profile, like every other container here. It refuses the
    # engine (non-root, no CAP_SYS_NICE) the NUMA memory-policy calls vLLM's CPU backend makes to
    # bind its memory to its threads' node (csrc/cpu/utils.cpp `init_cpu_memory_env`:
    # get_mempolicy, migrate_pages, set_mempolicy); vLLM 0.31 logs "numa_migrate_pages failed" and
    # "numa_set_membind failed" as warnings and goes on, binding its threads as before
    # (sched_setaffinity is allowed). Measured with real vLLM 0.31: a non-root two-rank group
    # under the whole default profile started and served, and every `make rehearse` starts its
    # ranks with those calls refused (tools/rehearse/seccomp.py, the "NUMA calls refused" row).
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _engine_env(spec: ServerSpec) -> list[dict[str, Any]]:
    # VLLM_CPU_ATTN_SPLIT_KV is deliberately left at vLLM's default (on, vllm/envs.py:899).
    # vLLM PR #46353 (2026-06-22) said Gemma 4 attention hung on Arm unless it was 0: the split-KV
    # reduction scratchpad was sized for fewer query heads, and a narrower element, than a split
    # writes, so split outputs overran the flags `reduce_splits` waits on (the cause PR #45844,
    # merged 2026-06-25, names and fixes). The pinned v0.31.0 (sdist, commit db9527a46, released
    # 2026-10-05) has that fix, read 2026-12-06: csrc/cpu/cpu_attn_impl.hpp:721-736 sizes the
    # scratchpad from the largest query-head tile of any reduction item, the tile and `float`
    # that lines 1945-1948 and 2000-2003 write with; Arm's kernels keep partial outputs in float
    # (cpu_attn_neon.hpp:258, cpu_attn_neon_bfmmla.hpp:329) and take 16 query heads a tile
    # (:336), so Gemma 4 12B's full layers (16 query heads on 1 KV head, head dim 512) and its
    # sliding ones (2 per KV head, 256) both run the GQA path; 256 and 512 are compiled for NEON
    # (generate_cpu_attn_dispatch.py:9,41). What turning it off costs (measured on x86 only) is
    # in docs/development.md, "Split-KV attention". A new vLLM pin re-reads these lines
    # (tests/components/test_manifest_fields.py holds the decision to the pin).
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
    mounts.append({"name": "programs", "mountPath": programs.MOUNT, "readOnly": True})
    return mounts


def _prefetch_container(spec: ServerSpec) -> dict[str, Any]:
    repo, revision = spec.download_repo
    env = [
        {"name": "MODEL_REPO", "value": repo},
        {"name": "MODEL_DIR", "value": spec.model_dir},
        {"name": "MODEL_REVISION", "value": revision or ""},
    ]
    if spec.produced_checkpoint:
        env.append({"name": "CHECKPOINT_MARKER", "value": CHECKPOINT_MARKER})
    return {
        "name": PREFETCH_CONTAINER,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": [
            "python3",
            f"{programs.MOUNT}/prefetch.py",
            "produced" if spec.produced_checkpoint else "download",
        ],
        "env": [
            *env,
            {"name": "DOWNLOAD_ATTEMPTS", "value": str(DOWNLOAD_ATTEMPTS)},
            {"name": "HF_TOKEN_PATH", "value": f"{HF_TOKEN_MOUNT}/{HF_TOKEN_KEY}"},
            {"name": "HOME", "value": CACHE_MOUNT},
            {"name": "HF_HOME", "value": f"{CACHE_MOUNT}/huggingface"},
            {"name": "HF_HUB_ENABLE_HF_TRANSFER", "value": "0"},
        ],
        "resources": _resources(spec),
        "securityContext": container_security_context(),
        "volumeMounts": _mounts(spec, engine=False),
    }


def _engine_container(spec: ServerSpec, role: Literal["leader", "worker"]) -> dict[str, Any]:
    args = engine_args(spec.engine(), role)
    container: dict[str, Any] = {
        "name": ENGINE_CONTAINER,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "env": _engine_env(spec),
        "resources": _resources(spec),
        "securityContext": container_security_context(),
        "volumeMounts": _mounts(spec, engine=True),
    }
    if role == "leader":
        # vLLM reads its key from the environment: it stays out of the process's argv. Behind
        # the gatekeeper it is the engine key, which the gatekeeper sends in place of the
        # client's: client keys rotate without restarting vLLM. With `vllm-key` it is the client
        # key itself. Headless ranks serve no HTTP and do not get it.
        key = API_KEY_KEY if spec.vllm_key else ENGINE_KEY_KEY
        container["env"].append(
            {
                "name": "VLLM_API_KEY",
                "valueFrom": {"secretKeyRef": {"name": spec.api_key_secret_name, "key": key}},
            }
        )
        container["env"] += [
            {
                "name": "GEMMA_VLLM_LOGGING",
                "value": json.dumps(engine_logging_config(), separators=(",", ":")),
            },
            {"name": "VLLM_LOGGING_CONFIG_PATH", "value": LOGGING_CONFIG_PATH},
        ]
        # The check process (`programs/liveness.py serve`, started by `programs/engine.sh`)
        # runs inside this container and asks vLLM on loopback; the kubelet's httpGet probes
        # ask it on the pod's address (`probes.LIVENESS_PORT`). Its startup phase (`/startup`)
        # checks the linear path and measures this node's step once vLLM's /health is 200
        # (every rank joined, the model loaded): before it passes, readiness is not probed, so
        # the Service sends the pod no client while it measures. A refusal stops PID 1, vLLM.
        checks = check_args(spec.probes, "leader", spec.port, spec.model, startup=True, stop_pid=1)
        container["command"] = engine_command("leader", checks)
        container["args"] = args
        container["startupProbe"] = leader_startup_probe(spec.probes, spec.startup_timeout_seconds)
        if not spec.gatekeeper_in_pod:
            # vLLM on the pod network (`vllm-key`, or behind an elastic stack's door) checks the
            # key on every route but the probes' (`programs/key_check.py`): its own check guards
            # /v1 only, and POST /invocations serves inference to any pod the policy admits.
            container["args"] = [*args, "--middleware", KEY_CHECK_MODULE]
            container["env"].append({"name": "PYTHONPATH", "value": programs.MOUNT})
        # vLLM binds loopback, so the kubelet asks /health of the gatekeeper's probe listener,
        # which no public client can fill (behind a door or with `vllm-key` vLLM listens on the
        # pod network and is asked itself). A number, not the gatekeeper's port name: the
        # kubelet resolves a probe's named port among the probed container's own ports only
        # (kubernetes v1.35 pkg/probe/util.go findPortByName), and a probe that errors is thrown
        # away, never a success (pkg/kubelet/prober/worker.go). The pod's containers share one
        # network. Behind a door the check process answers (`/ready`: vLLM's /health until the
        # preStop fails it), so a draining leader leaves the door's Service (`drain`).
        port = GATEKEEPER_PROBE_PORT if spec.gatekeeper_in_pod else spec.port
        container["readinessProbe"] = {
            "httpGet": {"path": "/health", "port": port},
            "periodSeconds": 10,
            "failureThreshold": 3,
            "timeoutSeconds": 5,
        }
        if spec.door:
            from components.manifests import door  # the elastic layer, elastic only

            container["readinessProbe"] = door.leader_readiness_probe()
        # /health stays 200 while a lost or hung rank stalls every request: liveness proves
        # tokens come out of the last stage (`probes`, `/live`).
        container["livenessProbe"] = liveness_probe(spec.probes)
        container["lifecycle"] = drain.lifecycle(
            drain.engine_pre_stop(
                spec.drain,
                "leader",
                spec.port,
                spec.master_port,
                None if spec.vllm_key else GATEKEEPER_PORT,
                ready_port=LIVENESS_PORT if spec.door else None,
            )
        )
    else:
        # A headless rank whose leader is gone waits forever: its check fails once the leader
        # stops answering, after the leader's own start-up. The leader's vLLM listens on its
        # loopback only: the check asks its gatekeeper's probe listener (the group's pods reach
        # any port of each other), never the public one. `engine.sh` waits for the leader's
        # name to resolve before vLLM starts (LWS #746).
        leader_port = GATEKEEPER_PROBE_PORT if spec.gatekeeper_in_pod else spec.port
        container["command"] = engine_command(
            "worker", check_args(spec.probes, "worker", leader_port, spec.model)
        )
        container["args"] = args
        container["startupProbe"] = startup_probe(spec.probes, spec.startup_timeout_seconds)
        container["livenessProbe"] = liveness_probe(spec.probes)
        container["lifecycle"] = drain.lifecycle(
            drain.engine_pre_stop(
                spec.drain, "worker", spec.port, spec.master_port, GATEKEEPER_PORT
            )
        )
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
    volumes.append(
        {
            "name": "programs",
            "configMap": {"name": programs_config_name(spec), "defaultMode": 0o444},
        }
    )
    if not spec.persistent_models:
        volumes.append({"name": "models", "emptyDir": {"sizeLimit": f"{spec.model_volume_gib}Gi"}})
    return volumes


def pod_template(
    spec: ServerSpec, role: Literal["leader", "worker"], key_fingerprint: str | None = None
) -> dict[str, Any]:
    """The leader's or a worker's pod: one rank per node, the engine, and the prefetch if any;
    the leader adds the gatekeeper (`spec.gatekeeper_in_pod`). `key_fingerprint`
    (`spec.key_fingerprint` of the key vLLM checks) goes into the leader's template, so a
    new key rolls the group."""
    containers, volumes = [_engine_container(spec, role)], _volumes(spec)
    metadata: dict[str, Any] = {
        "labels": object_labels(spec, f"vllm-{role}"),
        "annotations": {PROGRAMS_ANNOTATION: config_digest(_programs(spec))},
    }
    if spec.door:
        # The policy pack's sign that this group's gatekeeper is the door (policies/rules.py).
        metadata["labels"]["gemma-graviton.dev/behind-door"] = "true"
    if spec.vllm_key:
        # The policy pack's sign that vLLM checks the key itself (policies/rules.py).
        metadata["labels"][FRONT_DOOR_LABEL] = "vllm-key"
    if spec.autoscaled and role == "leader":
        # KEDA's queue trigger reads the leaders and the queue floor through one Service.
        metadata["labels"][QUEUE_SOURCE_LABEL] = "true"
    if role == "leader" and spec.gatekeeper_in_pod:
        from components.manifests import gatekeeper, gatekeeper_map  # the gatekeeper layer

        containers.append(
            gatekeeper.container(
                spec.gatekeeper_millicpu, spec.gatekeeper_memory_mib, spec.drain, engine_tmp=True
            )
        )
        volumes += gatekeeper.volumes(spec.gatekeeper_config_name, spec.api_key_secret_name)
        # Over every file of the ConfigMap, by name: the chat page's too when it is served.
        annotations = metadata["annotations"]
        annotations[gatekeeper.CONFIG_ANNOTATION] = config_digest(gatekeeper_map.files(spec))
        if key_fingerprint is not None:
            annotations[gatekeeper.KEY_ANNOTATION] = key_fingerprint
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
        "securityContext": pod_security_context(),
        # Every preStop ends within it: the LB's window, a reply, the idle check and vLLM's
        # stop (`infra.plan.rollout.plan_drain`, the safe end).
        "terminationGracePeriodSeconds": spec.drain.grace_s,
        "containers": containers,
        "volumes": volumes,
    }
    if spec.weight_prefetch:
        pod_spec["initContainers"] = [_prefetch_container(spec)]
    if spec.model_taint:
        pod_spec["tolerations"] = [toleration(spec.model_taint)]
    return {"metadata": metadata, "spec": pod_spec}
