"""The pods a stack's objects make and the nodes they may land on, as the semantics rules read
them (`components.manifests.semantics`): each controller's pod templates with the labels it adds,
and what exists beside the rendered objects once `pulumi up` is done (the node groups, the objects
the program creates)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.manifests.spec import Manifest

#: Any value: a label a controller puts on every pod with a value unknown before it runs.
ANY = None
#: A pod's possible labels: key -> the values it may take (`ANY`: whatever it is).
Labels = Mapping[str, frozenset[str] | None]

#: The node label the kubelet and cloud provider set to the node's zone (kubernetes v1.35
#: staging/src/k8s.io/api/core/v1/well_known_labels.go `LabelTopologyZone`).
ZONE_LABEL = "topology.kubernetes.io/zone"
#: The node label the cloud node controller sets to the node's instance type (same file,
#: `LabelInstanceTypeStable`; cloud-provider's node controller writes it at registration).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


@dataclass(frozen=True)
class NodeGroup:
    """A node group the stack creates, as the scheduler sees one of its nodes."""

    name: str
    #: Labels on every node (the node group's, plus the zone label).
    labels: Mapping[str, str]
    #: Taints on every node (key, value, effect).
    taints: Sequence[Mapping[str, str]] = ()
    #: What is left of one node's allocatable for the stack's pods after its DaemonSets.
    millicpu: int = 0
    memory_mib: float = 0.0
    #: The EC2 type those figures are of.
    instance_type: str = ""


@dataclass(frozen=True)
class Pod:
    """One pod template, with the labels its controllers add."""

    where: str
    namespace: str
    labels: Labels
    spec: Mapping[str, Any]
    #: The claims a StatefulSet makes for it from its templates (namespace-local names).
    claims: tuple[str, ...] = ()


@dataclass(frozen=True)
class World:
    """What exists once `pulumi up` is done, beside the rendered objects."""

    node_groups: Sequence[NodeGroup] = ()
    #: Objects the program creates that no file renders (the Secrets, the PersistentVolumes).
    created: Sequence[Manifest] = ()
    #: (pod template, port number) -> why the pod serves that port without declaring it: a
    #: documented exception to the Service and NetworkPolicy rules' "declared" (e.g.
    #: "LeaderWorkerSet/gemma-vllm leaderTemplate", 8000).
    undeclared: Mapping[tuple[str, int], str] = field(default_factory=dict)


def fixed_labels(values: Mapping[str, str]) -> dict[str, frozenset[str] | None]:
    """Labels whose values are known: each key to its one value."""
    return {k: frozenset([v]) for k, v in values.items()}


def _lws_pods(obj: Manifest, max_groups: int) -> Iterator[Pod]:
    """The leader and worker pods of a LeaderWorkerSet, with the labels the controller adds.

    lws v0.10.0: the leader StatefulSet's template gets `name`, `worker-index: "0"` and the
    revision hash (pkg/controllers/leaderworkerset_controller.go
    `constructLeaderStatefulSetApplyConfiguration`); each worker StatefulSet's template gets
    `name`, `group-index`, `group-key` and the revision (pkg/controllers/pod_controller.go
    `constructWorkerStatefulSetApplyConfiguration`); the pod webhook adds the leader's
    `group-index` and `group-key` and a worker's `worker-index` from its ordinal, 1 on
    (pkg/webhooks/pod_webhook.go `Default`). Label keys: api/leaderworkerset/v1/
    leaderworkerset_types.go. Each rank's claims are `<template>-<pod>` (a StatefulSet's), pods
    `<lws>-<group>` and `<lws>-<group>-<rank>` (pod_controller.go)."""
    name = obj["metadata"]["name"]
    ns = obj["metadata"].get("namespace", "default")
    template = obj["spec"]["leaderWorkerTemplate"]
    size = int(template.get("size", 1))
    claim_names = [c["metadata"]["name"] for c in template.get("volumeClaimTemplates", [])]
    common = {
        "leaderworkerset.sigs.k8s.io/name": frozenset([name]),
        "leaderworkerset.sigs.k8s.io/group-index": ANY,
        "leaderworkerset.sigs.k8s.io/group-key": ANY,
        "leaderworkerset.sigs.k8s.io/template-revision-hash": ANY,
    }
    groups = range(max_groups)
    parts = [("leaderTemplate", frozenset(["0"]), [f"{name}-{g}" for g in groups])]
    workers = [f"{name}-{g}-{r}" for g in groups for r in range(1, size)]
    if size > 1:
        parts.append(("workerTemplate", frozenset(str(r) for r in range(1, size)), workers))
    for part, index, pods in parts:
        pod_template = template.get(part) or template["workerTemplate"]
        labels = {
            **fixed_labels(pod_template.get("metadata", {}).get("labels", {})),
            **common,
            "leaderworkerset.sigs.k8s.io/worker-index": index,
        }
        claims = tuple(f"{c}-{pod}" for c in claim_names for pod in pods)
        yield Pod(f"LeaderWorkerSet/{name} {part}", ns, labels, pod_template["spec"], claims)


def _groups(obj: Manifest, objects: Sequence[Manifest]) -> int:
    """How many groups a LeaderWorkerSet may run: its `replicas`, or the most its ScaledObject
    sets, plus a rollout's surge groups (lws v0.10.0 leaderworkerset_controller.go
    `rollingUpdateParameters`)."""
    spec = obj["spec"]
    replicas = spec.get("replicas")
    if replicas is None:
        scalers = [
            o["spec"].get("maxReplicaCount", 100)
            for o in objects
            if o["kind"] == "ScaledObject"
            and o["spec"]["scaleTargetRef"].get("name") == obj["metadata"]["name"]
        ]
        replicas = max(scalers, default=1)
    surge = spec.get("rolloutStrategy", {}).get("rollingUpdateConfiguration", {}).get("maxSurge")
    return int(replicas) + int(surge or 0)


def pods(objects: Sequence[Manifest]) -> list[Pod]:
    """Every pod template the objects carry, with the labels their controllers add."""
    found = []
    for obj in objects:
        kind, meta = obj["kind"], obj["metadata"]
        name, ns = f"{kind}/{meta['name']}", meta.get("namespace", "default")
        spec = obj.get("spec", {})
        if kind == "LeaderWorkerSet":
            found += _lws_pods(obj, _groups(obj, objects))
        elif kind == "Pod":
            found.append(Pod(name, ns, fixed_labels(meta.get("labels", {})), spec))
        elif kind in ("Job", "CronJob"):
            template = (
                spec["template"] if kind == "Job" else spec["jobTemplate"]["spec"]["template"]
            )
            # The API server adds the Job's selector labels to its pod template (kubernetes
            # v1.35 pkg/registry/batch/job/strategy.go `generateSelector`).
            job = {"batch.kubernetes.io/job-name": frozenset([meta["name"]]), "job-name": ANY}
            labels = {**fixed_labels(template.get("metadata", {}).get("labels", {})), **job}
            found.append(Pod(name, ns, labels, template["spec"]))
        elif "template" in spec and "spec" in spec["template"]:
            # Deployment (the ReplicaSet adds `pod-template-hash`, pkg/controller/deployment/
            # sync.go), StatefulSet, DaemonSet: the template's own labels select.
            labels = fixed_labels(spec["template"].get("metadata", {}).get("labels", {}))
            found.append(Pod(name, ns, labels, spec["template"]["spec"]))
    return found
