"""The LeaderWorkerSet of vLLM ranks and the storage class its per-rank claims bind to."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.manifests.pods import pod_template
from components.manifests.spec import LWS_API, Manifest, ServerSpec, object_meta


def leader_worker_set(spec: ServerSpec) -> Manifest:
    """`replicas` groups of `stages` pods: rank 0 serves the API, the others are headless."""
    template: dict[str, Any] = {
        "size": spec.stages,
        # A pipeline cannot lose a rank: the gloo group breaks, so the whole group restarts.
        "restartPolicy": "RecreateGroupOnPodRestart",
        "leaderTemplate": pod_template(spec, "leader"),
        "workerTemplate": pod_template(spec, "worker"),
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
            "replicas": spec.replicas,
            # The leader is Ready only after the workers join: LeaderReady would deadlock.
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": template,
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
