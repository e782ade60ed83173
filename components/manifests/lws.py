"""The LeaderWorkerSet of vLLM ranks and the storage class its per-rank claims bind to."""

from __future__ import annotations

from typing import Any

from components.manifests.pods import pod_template
from components.manifests.spec import LWS_API, LWS_NAME_LABEL, Manifest, ServerSpec, object_meta


def leader_worker_set(spec: ServerSpec, key_fingerprint: str | None = None) -> Manifest:
    """`replicas` groups of `stages` pods: rank 0 serves the API, the others are headless.
    `key_fingerprint` marks the leader template with the API key's fingerprint (rotation)."""
    template: dict[str, Any] = {
        "size": spec.stages,
        # A pipeline cannot lose a rank: the gloo group breaks, so the whole group restarts.
        "restartPolicy": "RecreateGroupOnPodRestart",
        "leaderTemplate": pod_template(spec, "leader", key_fingerprint),
        "workerTemplate": pod_template(spec, "worker"),
    }
    if spec.persistent_models:
        template["volumeClaimTemplates"] = [
            {"metadata": {"name": MODELS_CLAIM}, "spec": _claim(spec)}
        ]
        # LWS passes this to both StatefulSets (pkg/controllers/pod_controller.go). The worker
        # StatefulSet is owned by the leader pod, so a group recreation deletes it; with
        # `Delete` the workers' claims went with it and only the leader kept its weights. The
        # claims are created (and, on destroy, deleted) by Pulumi instead: see `model_claims`.
        template["persistentVolumeClaimRetentionPolicy"] = {
            "whenDeleted": "Retain",
            "whenScaled": "Retain",
        }
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": object_meta(
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
            # Autoscaled: KEDA's HPA sets the count through the scale subresource. Left unset
            # here, the field is not Pulumi's (server-side apply), so an update never resets it.
            **({} if spec.autoscaled else {"replicas": spec.replicas}),
            # The leader is Ready only after the workers join: LeaderReady would deadlock.
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": template,
            "rolloutStrategy": rollout_strategy(spec.rollout_surge),
        },
    }


def rollout_strategy(surge: int) -> dict[str, Any]:
    """Surge groups first and none unavailable, so the old groups serve until the new ones do;
    without surge, one group at a time (LWS refuses both at 0: maxUnavailable 1, its default).
    LWS creates the surge groups from the new template above `replicas` and removes them once
    every group is updated and ready (lws v0.10.0 pkg/controllers/leaderworkerset_controller.go
    `rollingUpdateParameters`)."""
    return {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxSurge": surge, "maxUnavailable": 0 if surge else 1},
    }


MODELS_CLAIM = "models"
"""Name of the per-rank claim template (and of the pods' volume)."""


def _claim(spec: ServerSpec) -> dict[str, Any]:
    return {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": spec.storage_class,
        "resources": {"requests": {"storage": f"{spec.model_volume_gib}Gi"}},
    }


def rank_pods(spec: ServerSpec) -> list[str]:
    """Every rank's pod name: LWS names the leader StatefulSet after the LeaderWorkerSet (pods
    `<lws>-<group>`) and each group's worker StatefulSet after its leader pod, with ordinals from
    1 (pods `<lws>-<group>-<rank>`; lws v0.10.0 pkg/controllers/pod_controller.go)."""
    pods = []
    # A rollout's surge groups take the next indices: their claims are made here too, so they
    # are Pulumi's (reused by the next rollout, deleted on destroy) rather than left behind.
    for group in range(spec.replicas + spec.rollout_surge):
        leader = f"{spec.lws_name}-{group}"
        pods += [leader, *(f"{leader}-{rank}" for rank in range(1, spec.stages))]
    return pods


def model_claims(spec: ServerSpec) -> list[Manifest]:
    """One claim per rank, named as a StatefulSet names its claims (`<template>-<pod>`), so the
    StatefulSets find and reuse them instead of creating their own.

    Made by Pulumi, they outlive a group recreation (LWS deletes and recreates the pods and the
    worker StatefulSets, not these), so every rank restarts from its own weights; and
    `pulumi destroy` deletes them after the LeaderWorkerSet and before the storage class, the
    CSI driver and the nodes.
    """
    if not spec.persistent_models:
        return []
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": object_meta(spec, f"{MODELS_CLAIM}-{pod}", "weights"),
            "spec": _claim(spec),
        }
        for pod in rank_pods(spec)
    ]


def pod_disruption_budget(spec: ServerSpec) -> Manifest | None:
    """With two or more groups, at most one model pod may be evicted while every pod is healthy;
    evicting it breaks its group (LWS recreates it), whose pods then count as unhealthy, so no
    further eviction is allowed until that group serves again: a node drain takes one group at a
    time. Every rank of the LeaderWorkerSet carries `leaderworkerset.sigs.k8s.io/name` (lws
    v0.10.0 api/leaderworkerset/v1/leaderworkerset_types.go `SetNameLabelKey`, put on the leader and
    worker StatefulSets' pod templates in pkg/controllers/leaderworkerset_controller.go and
    pod_controller.go). Pods that are not ready may always be evicted
    (`unhealthyPodEvictionPolicy: AlwaysAllow`, GA in Kubernetes 1.31): a broken group must not
    hold a node drain. With one group there is nothing to keep serving: no budget."""
    if spec.replicas < 2:
        return None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": object_meta(spec, f"{spec.lws_name}-groups", "disruption-budget"),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": {LWS_NAME_LABEL: spec.lws_name}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }
