"""The components' plain Kubernetes objects, each created from its built manifest
(`components.manifests`) as its typed pulumi-kubernetes resource: one place that turns a
manifest's fields into the resource's arguments, so the object applied is the object rendered."""

from __future__ import annotations

import re
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.manifests.spec import Manifest

#: The kinds created from a manifest, by their typed resource (which gives the type token).
KINDS: dict[str, Any] = {
    "ConfigMap": k8s.core.v1.ConfigMap,
    "Deployment": k8s.apps.v1.Deployment,
    "Job": k8s.batch.v1.Job,
    "NetworkPolicy": k8s.networking.v1.NetworkPolicy,
    "PersistentVolumeClaim": k8s.core.v1.PersistentVolumeClaim,
    "PodDisruptionBudget": k8s.policy.v1.PodDisruptionBudget,
    "PriorityClass": k8s.scheduling.v1.PriorityClass,
    "Role": k8s.rbac.v1.Role,
    "RoleBinding": k8s.rbac.v1.RoleBinding,
    "Secret": k8s.core.v1.Secret,
    "Service": k8s.core.v1.Service,
    "ServiceAccount": k8s.core.v1.ServiceAccount,
    "StorageClass": k8s.storage.v1.StorageClass,
}


def create(
    obj: Manifest, resource: str, namespace: pulumi.Input[str] | None = None, **opts: Any
) -> Any:
    """`obj` as the resource `resource`, every top-level field of the manifest an argument
    (`roleRef` as `role_ref`); a kind not in `KINDS` as a `CustomResource`. `namespace` replaces
    the manifest's own: the created Namespace's name, an implicit dependency. `opts` are the
    resource's options (`parent`, `depends_on`)."""
    meta = obj["metadata"] if namespace is None else {**obj["metadata"], "namespace": namespace}
    fields = {
        re.sub("([A-Z])", r"_\1", key).lower(): value
        for key, value in obj.items()
        if key not in ("apiVersion", "kind", "metadata")
    }
    if obj["kind"] not in KINDS:  # a custom resource (a LeaderWorkerSet, a ScaledObject)
        fields |= {"api_version": obj["apiVersion"], "kind": obj["kind"]}
    kind = KINDS.get(obj["kind"], k8s.apiextensions.CustomResource)
    return kind(resource, metadata=meta, **fields, opts=pulumi.ResourceOptions(**opts))
