"""The LeaderWorkerSet of vLLM ranks and the storage class its per-rank claims bind to."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.manifests.pods import pod_template
from components.manifests.spec import LWS_API, Manifest, ServerSpec, object_meta


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
        },
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
    for group in range(spec.replicas):
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


def static_volume(
    name: str,
    claim: tuple[str, str],
    storage_class: str,
    size_gib: int,
    volume_id: str,
    zone: str,
) -> Manifest:
    """A PersistentVolume for one EBS volume the program created, bound to `claim` (namespace,
    name) only. `Retain`: the volume is Pulumi's, which deletes it after this object and before
    the CSI driver that detaches it (terraform-provider-aws internal/service/ec2/ebs_volume.go
    `resourceEBSVolumeDelete` retries DeleteVolume while the volume is in use, within the delete
    timeout). A volume the driver provisioned dynamically would instead be deleted by the driver
    after its claim, possibly after Pulumi had already removed the driver, and be left billing.
    """
    namespace, claim_name = claim
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "gemma-graviton"}},
        "spec": {
            "capacity": {"storage": f"{size_gib}Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": storage_class,
            "claimRef": {"namespace": namespace, "name": claim_name},
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": volume_id, "fsType": "ext4"},
            # EBS volumes attach only in their own zone.
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "topology.kubernetes.io/zone",
                                    "operator": "In",
                                    "values": [zone],
                                }
                            ]
                        }
                    ]
                }
            },
        },
    }


def storage_class(
    name: str, throughput_mibps: int, tags: Mapping[str, str] | None = None
) -> Manifest:
    """Encrypted gp3 through the EBS CSI driver, bound where the pod lands (the node's zone).

    `tags` go on every volume the driver creates: parameters named `tagSpecification_<n>` with
    "key=value" values (aws-ebs-csi-driver docs/tagging.md, v1.6.0 and later); the provider's
    default tags never reach volumes the driver creates.
    """
    parameters = {"type": "gp3", "encrypted": "true", "throughput": str(throughput_mibps)}
    for index, (key, value) in enumerate(sorted((tags or {}).items()), start=1):
        parameters[f"tagSpecification_{index}"] = f"{key}={value}"
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "gemma-graviton"}},
        "provisioner": "ebs.csi.aws.com",
        "parameters": parameters,
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
        "allowVolumeExpansion": True,
    }
