"""A Job that answers "do the LeaderWorkerSet webhooks admit objects yet?", as pure objects.

The LWS controller registers its webhooks only after it has generated and mounted its
certificates (kubernetes-sigs/lws v0.10.0 `cmd/main.go`, `setupControllers` waits on
`certsReady`), while its readiness probe is a plain ping (`healthz.Ping`), so the chart's
Deployment is Ready before the webhooks answer. The webhooks are `failurePolicy: Fail`
(`charts/lws/templates/webhook/webhook.yaml`), and pulumi-kubernetes retries a create only on
NotFound and NoMatch errors (provider/pkg/await/await.go, `retrier.Do(apierrors.IsNotFound,
meta.IsNoMatchError)`), so a LeaderWorkerSet created then fails with `failed calling webhook
"mleaderworkerset.kb.io": ... connection refused`.

The Job makes the API server call both LeaderWorkerSet webhooks (a server-side dry run calls
webhooks whose `sideEffects` is None) with a throw-away object, once per pod; a refused call fails
the pod and the Job retries with its exponential back-off, within `deadline_seconds`. Pulumi
awaits the Job (batch/v1 Job is awaited until Complete, provider/pkg/await/job.go), and whatever
creates a LeaderWorkerSet depends on it. kubectl's own error becomes the pod's termination message
(`FallbackToLogsOnError`), which Pulumi prints when the Job fails.
"""

from __future__ import annotations

from typing import Any

import yaml

from components.manifests import images
from components.manifests.spec import LWS_API, Manifest

#: The upstream kubectl image (published on registry.k8s.io since v1.28), of the cluster's minor
#: version, pinned by the digest of its multi-arch index in `images.json` (`make pin-images`),
#: tag kept for readers. v1.35.1, not v1.35.0: no public source gave v1.35.0's digest.
KUBECTL_IMAGE = images.reference("kubectl")
#: The probe object's pod image; it is never pulled (the object is never created), pinned all the
#: same (pause 3.10, `images.json`).
PROBE_POD_IMAGE = images.reference("pause")
PROBE_MOUNT = "/probe"
GATE_LABELS = {"app.kubernetes.io/name": "lws-webhook-gate", "app.kubernetes.io/part-of": "lws"}


def probe_object(namespace: str, name: str) -> Manifest:
    """The smallest LeaderWorkerSet both webhooks accept; only ever sent as a dry run."""
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 1,
                "workerTemplate": {
                    "spec": {"containers": [{"name": "probe", "image": PROBE_POD_IMAGE}]}
                },
            },
        },
    }


def _meta(namespace: str, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": dict(GATE_LABELS)}


def webhook_gate(
    namespace: str, name: str, deadline_seconds: int = 600, image: str = KUBECTL_IMAGE
) -> list[Manifest]:
    """ServiceAccount, Role (dry-run create of LeaderWorkerSets here), RoleBinding, the probe
    object in a ConfigMap, and the Job, in apply order."""
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(namespace, name)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(namespace, name),
            # A dry run needs the same permission as the real call.
            "rules": [
                {
                    "apiGroups": ["leaderworkerset.x-k8s.io"],
                    "resources": ["leaderworkersets"],
                    "verbs": ["create"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(namespace, name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(namespace, name),
            "data": {
                "leaderworkerset.yaml": yaml.safe_dump(
                    probe_object(namespace, f"{name}-probe"), sort_keys=False
                )
            },
        },
        _job(namespace, name, deadline_seconds, image),
    ]


def _job(namespace: str, name: str, deadline_seconds: int, image: str) -> Manifest:
    metadata = _meta(namespace, name)
    metadata["annotations"] = {
        # Pulumi gives up a little after the Job's own deadline, so the Job's failure (with
        # kubectl's message) is what the operator sees.
        "pulumi.com/timeoutSeconds": str(deadline_seconds + 60),
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            # Bounded by the deadline, not by the count: the back-off doubles from 10 s.
            "backoffLimit": 30,
            "activeDeadlineSeconds": deadline_seconds,
            "template": {
                "metadata": {"labels": dict(GATE_LABELS)},
                "spec": {
                    "serviceAccountName": name,
                    "restartPolicy": "Never",
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65532,
                        "runAsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "dry-run-create",
                            "image": image,
                            "command": [
                                "kubectl",
                                "create",
                                "--dry-run=server",
                                f"--filename={PROBE_MOUNT}/leaderworkerset.yaml",
                                "--output=name",
                            ],
                            "env": [{"name": "HOME", "value": "/tmp"}],
                            "terminationMessagePolicy": "FallbackToLogsOnError",
                            "resources": {
                                "requests": {"cpu": "50m", "memory": "64Mi"},
                                "limits": {"cpu": "50m", "memory": "64Mi"},
                            },
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": [
                                {"name": "probe", "mountPath": PROBE_MOUNT, "readOnly": True},
                                {"name": "tmp", "mountPath": "/tmp"},
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "probe", "configMap": {"name": name}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                    ],
                },
            },
        },
    }
