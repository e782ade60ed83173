"""Kubernetes' own semantics over rendered objects: what no schema checks and no mock shows.

Pure: each rule takes the objects a stack applies (and, where it needs them, what the program
creates beside them: the node groups, the Secrets, the PersistentVolumes) and returns one line per
fault, naming the object and the rule. Each rule cites the kubelet, scheduler or controller source
it encodes (Kubernetes v1.35, LeaderWorkerSet v0.10.0).

`check` runs them all; `infra.adapters.semantics` builds a stack's node groups and program-made
objects from the same plan the program uses.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from components.manifests.pod_world import (
    ANY,
    ZONE_LABEL,
    Labels,
    NodeGroup,
    Pod,
    World,
    fixed_labels,
    pods,
)
from components.manifests.spec import Manifest


def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*pod.get("initContainers", []), *pod.get("containers", [])]


def _serving(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Containers whose ports a Service or policy reaches: the regular ones and the sidecars
    (init containers with `restartPolicy: Always`)."""
    sidecars = [c for c in pod.get("initContainers", []) if c.get("restartPolicy") == "Always"]
    return [*pod.get("containers", []), *sidecars]


# -- selectors ---------------------------------------------------------------------------------


def _matches(selector: Mapping[str, Any], labels: Labels) -> bool:
    """A LabelSelector (matchLabels, matchExpressions) against a pod's possible labels: true when
    some pod of the template matches (apimachinery v1.35 pkg/apis/meta/v1/helpers.go
    `LabelSelectorAsSelector`; an empty selector matches everything)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        have = labels.get(key)
        if key not in labels or (have is not ANY and value not in have):
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], set(expr.get("values", []))
        have = labels.get(key)
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op == "In" and (key not in labels or (have is not ANY and not have & values)):
            return False
        if op == "NotIn" and key in labels and have is not ANY and have <= values:
            return False
    return True


def _selected(selector: Mapping[str, Any], ns: str, all_pods: Iterable[Pod]) -> list[Pod]:
    return [p for p in all_pods if p.namespace == ns and _matches(selector, p.labels)]


# -- rule: named probe ports -------------------------------------------------------------------

HANDLERS = ("startupProbe", "readinessProbe", "livenessProbe")


def _named_ports(handler: Mapping[str, Any]) -> Iterator[str]:
    for kind in ("httpGet", "tcpSocket", "grpc"):
        port = handler.get(kind, {}).get("port")
        if isinstance(port, str):
            yield port


def unresolved_ports(objects: Sequence[Manifest]) -> list[str]:
    """Every probe or hook whose named port its own container does not declare.

    The kubelet resolves a named port among the probed container's own `ports` only (kubernetes
    v1.35 `pkg/probe/util.go` `findPortByName`; lifecycle hooks the same way,
    `pkg/kubelet/lifecycle/handlers.go` `resolvePort`), and throws away a probe that errors
    (`pkg/kubelet/prober/worker.go`: "Prober error, throw away the result"): a startup probe on a
    port its container does not declare never succeeds, and the pod never starts or turns Ready.
    """
    found = []
    for pod in pods(objects):
        for container in _containers(pod.spec):
            declared = {p.get("name") for p in container.get("ports", [])}
            handlers = [(h, container[h]) for h in HANDLERS if h in container]
            lifecycle = container.get("lifecycle", {})
            handlers += [(h, lifecycle[h]) for h in ("postStart", "preStop") if h in lifecycle]
            for kind, handler in handlers:
                found += [
                    f"{pod.where} {container['name']} {kind} port {port!r}"
                    for port in _named_ports(handler)
                    if port not in declared
                ]
    return list(dict.fromkeys(found))


def _tolerated(pod: Mapping[str, Any], taint: Mapping[str, str]) -> bool:
    """kubernetes v1.35 staging/src/k8s.io/api/core/v1/toleration.go `ToleratesTaint`: an empty
    effect or key matches any; `Exists` any value, `Equal` (the default) the same value. The
    `Lt`/`Gt` operators of the alpha TaintTolerationComparisonOperators gate match nothing here,
    as with the gate off (EKS's default)."""
    for tol in pod.get("tolerations") or []:
        if tol.get("effect") and tol["effect"] != taint["effect"]:
            continue
        if tol.get("key") and tol["key"] != taint["key"]:
            continue
        operator = tol.get("operator") or "Equal"
        if operator == "Exists" or (operator == "Equal" and tol.get("value", "") == taint["value"]):
            return True
    return False


# -- rule: Services ----------------------------------------------------------------------------


def _declares(pod: Pod, port: int | str, protocol: str, world: World | None = None) -> bool:
    if world is not None and (pod.where, port) in world.undeclared:
        return True
    for container in _serving(pod.spec):
        for declared in container.get("ports", []):
            if declared.get("protocol", "TCP") != protocol:
                continue
            if port in (declared.get("name"), declared["containerPort"]):
                return True
    return False


def unserved_services(objects: Sequence[Manifest], world: World | None = None) -> list[str]:
    """Every Service whose selector matches no rendered pod, or one of whose ports does not
    resolve to a port a selected pod declares.

    The EndpointSlice controller lists the pods matching `selector` (kubernetes v1.35
    pkg/controller/endpointslice/endpointslice_controller.go `syncService`) and resolves each
    port on each pod with `FindPort` (staging/src/k8s.io/endpointslice/utils.go, called by
    `getEndpointPorts`): a name among the regular and sidecar containers' ports, with the same
    protocol; a pod where it fails is left out of that port's endpoints, so a Service matching no
    pod, or only pods without the port, has no endpoint and every connection is refused. A
    number `FindPort` takes as is; the check asks that the pod declare it too, or that
    `world.undeclared` say why it serves the port undeclared, so a port nothing listens on is not
    targeted silently.
    """
    all_pods = pods(objects)
    found = []
    for svc in (o for o in objects if o["kind"] == "Service"):
        spec, name = svc["spec"], f"Service/{svc['metadata']['name']}"
        selector = spec.get("selector")
        if not selector or spec.get("type") == "ExternalName":
            continue  # endpoints are someone else's
        ns = svc["metadata"].get("namespace", "default")
        chosen = _selected({"matchLabels": selector}, ns, all_pods)
        if not chosen:
            found.append(f"{name} selector {selector} matches no pod")
            continue
        for port in spec.get("ports", []):
            target = port.get("targetPort", port["port"])
            protocol = port.get("protocol", "TCP")
            found += [
                f"{name} port {port['port']} targetPort {target!r}: {pod.where} declares no "
                f"such {protocol} port"
                for pod in chosen
                if not _declares(pod, target, protocol, world)
            ]
    return found


#: The in-tree controller's and the AWS Load Balancer Controller's target nodes, "k=v,k=v"
#: (`components.manifests.access.TARGET_NODES_ANNOTATION` cites both).
TARGET_NODES = "service.beta.kubernetes.io/aws-load-balancer-target-node-labels"


def untargeted_load_balancers(objects: Sequence[Manifest], world: World) -> list[str]:
    """Every LoadBalancer Service with no target nodes (then every node of the cluster is a target,
    its security group opened), or whose target labels some node group that a selected pod may
    land on lacks: the NLB would not reach that pod (cloud-provider-aws v1.35.2
    pkg/providers/v1/aws_loadbalancer.go `filterTargetNodes`: a node is a target when it has every
    key, with the value unless the value is empty)."""
    all_pods, found = pods(objects), []
    for svc in (o for o in objects if o.get("spec", {}).get("type") == "LoadBalancer"):
        name = f"Service/{svc['metadata']['name']}"
        labels = svc["metadata"].get("annotations", {}).get(TARGET_NODES, "")
        pairs = [(k, v) for k, _, v in (p.strip().partition("=") for p in labels.split(",")) if k]
        if not pairs:
            found.append(f"{name} names no {TARGET_NODES}: every node of the cluster is a target")
            continue
        ns = svc["metadata"].get("namespace", "default")
        found += [
            f"{name} {TARGET_NODES} {labels!r}: node group {group.name} of {pod.where} lacks them"
            for pod in _selected({"matchLabels": svc["spec"]["selector"]}, ns, all_pods)
            for group in world.node_groups
            if _node_ok(pod.spec, group) is None
            and any(k not in group.labels or v not in ("", group.labels[k]) for k, v in pairs)
        ]
    return found


# -- rule: NetworkPolicies ---------------------------------------------------------------------


def loose_network_policies(objects: Sequence[Manifest], world: World | None = None) -> list[str]:
    """Every NetworkPolicy whose podSelector matches no rendered pod, whose same-namespace peer
    selector matches none, or one of whose ingress ports no selected pod declares.

    A policy applies to the pods its `podSelector` selects in its namespace; a rule's `ports`
    name a number or a named port of those pods, and a named port a pod lacks matches nothing
    (kubernetes v1.35 staging/src/k8s.io/api/networking/v1/types.go `NetworkPolicyPort`;
    enforced here by the VPC CNI's network policy agent). A selector that matches nothing
    protects nothing; a port no container declares admits traffic to nothing, or is a typo,
    unless `world.undeclared` says why a selected pod serves it undeclared.
    """
    all_pods = pods(objects)
    found = []
    for policy in (o for o in objects if o["kind"] == "NetworkPolicy"):
        pname = policy["metadata"]["name"]
        name, ns = f"NetworkPolicy/{pname}", policy["metadata"].get("namespace", "default")
        chosen = _selected(policy["spec"].get("podSelector") or {}, ns, all_pods)
        if not chosen:
            found.append(f"{name} podSelector matches no pod")
            continue
        for index, rule in enumerate(policy["spec"].get("ingress") or []):
            for peer in rule.get("from") or []:
                local = "podSelector" in peer and "namespaceSelector" not in peer
                if local and not _selected(peer["podSelector"], ns, all_pods):
                    found.append(f"{name} ingress[{index}] peer {peer} matches no pod")
            for port in rule.get("ports") or []:
                number, protocol = port.get("port"), port.get("protocol", "TCP")
                if number is None:
                    continue  # every port
                if not any(_declares(pod, number, protocol, world) for pod in chosen):
                    found.append(
                        f"{name} ingress[{index}] port {number!r}: no selected pod declares it"
                    )
    return found


# -- rule: Secrets and ConfigMaps --------------------------------------------------------------


def _keys(obj: Manifest) -> set[str]:
    return {k for part in ("data", "stringData", "binaryData") for k in obj.get(part) or {}}


def _references(pod: Pod) -> Iterator[tuple[str, str, str | None, str]]:
    """(kind, name, key or None, where) of every Secret and ConfigMap the pod needs: volumes,
    projected volumes, env `valueFrom`, `envFrom`, image pull Secrets; optional ones left out."""
    spec = pod.spec
    sources = []
    for volume in spec.get("volumes", []):
        sources.append((volume["name"], volume))
        for source in volume.get("projected", {}).get("sources", []):
            sources.append((volume["name"], source))
    for vname, source in sources:
        for kind, field_name, name_key in (
            ("Secret", "secret", "secretName"),
            ("ConfigMap", "configMap", "name"),
        ):
            ref = source.get(field_name)
            if ref is None or ref.get("optional"):
                continue
            name = ref.get(name_key) or ref.get("name")
            items = ref.get("items") or [None]
            for item in items:
                yield kind, name, item and item["key"], f"volume {vname}"
    for container in _containers(spec):
        cname = container["name"]
        for env in container.get("env", []):
            value_from = env.get("valueFrom", {})
            for kind, field_name in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
                ref = value_from.get(field_name)
                if ref and not ref.get("optional"):
                    yield kind, ref["name"], ref["key"], f"{cname} env {env['name']}"
        for env_from in container.get("envFrom", []):
            for kind, field_name in (("Secret", "secretRef"), ("ConfigMap", "configMapRef")):
                ref = env_from.get(field_name)
                if ref and not ref.get("optional"):
                    yield kind, ref["name"], None, f"{cname} envFrom"
    for pull in spec.get("imagePullSecrets", []):
        yield "Secret", pull["name"], None, "imagePullSecrets"
    # The ServiceAccount admission plugin refuses a pod whose account does not exist ("error
    # looking up service account", kubernetes v1.35 plugin/pkg/admission/serviceaccount/
    # admission.go `Admit`); `default` exists in every namespace.
    account = spec.get("serviceAccountName") or "default"
    if account != "default":
        yield "ServiceAccount", account, None, "serviceAccountName"


def missing_references(objects: Sequence[Manifest], world: World | None = None) -> list[str]:
    """Every Secret or ConfigMap (and key, where one is named) a pod needs that neither the
    rendered objects nor the program create.

    The kubelet refuses to set up a secret or configMap volume whose object is missing, or
    whose `items` name a key it lacks ("references non-existent secret key", kubernetes v1.35
    pkg/volume/secret/secret.go and pkg/volume/configmap/configmap.go `MakePayload`; projected
    volumes the same, pkg/volume/projected/projected.go), and to start a container whose env
    names a missing object or key ("couldn't find key %v in Secret", pkg/kubelet/kubelet_pods.go
    `makeEnvironmentVariables`): the pod stays in ContainerCreating or CreateContainerConfigError.
    """
    made: dict[tuple[str, str, str], set[str]] = {}
    for obj in [*objects, *(world.created if world else ())]:
        if obj["kind"] in ("Secret", "ConfigMap", "ServiceAccount"):
            ns = obj["metadata"].get("namespace", "default")
            made[obj["kind"], ns, obj["metadata"]["name"]] = _keys(obj)
    found = []
    for pod in pods(objects):
        for kind, name, key, where in _references(pod):
            keys = made.get((kind, pod.namespace, name))
            if keys is None:
                found.append(f"{pod.where} {where}: {kind} {name} is not created")
            elif key is not None and key not in keys:
                found.append(f"{pod.where} {where}: {kind} {name} has no key {key!r}")
    return list(dict.fromkeys(found))


# -- rule: claims bind -------------------------------------------------------------------------

#: The decimal (k, M, G, T) and binary (Ki, Mi, Gi, Ti) suffixes of a quantity.
_UNITS = {"": 1} | {
    unit: base**power
    for power, prefix in enumerate("kMGT", start=1)
    for unit, base in ((prefix, 1000), (f"{prefix.upper()}i", 1024))
}


def quantity(value: str | int | float) -> float:
    """A resource quantity in its base unit (bytes, cores): "26Gi", "30m", "6", "1.5"."""
    text = str(value)
    match = re.fullmatch(r"([0-9.]+)(m|[kMGT]i?|)", text)
    if match is None:
        raise ValueError(f"not a quantity: {text!r}")
    number, unit = float(match[1]), match[2]
    return number / 1000 if unit == "m" else number * _UNITS[unit]


def _terms_match(terms: Sequence[Mapping[str, Any]], labels: Mapping[str, str]) -> bool:
    """Node selector terms (ORed; each term's expressions ANDed, as a label selector's) against
    a node's labels (staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/
    nodeaffinity.go); the `Gt` and `Lt` operators match nothing here."""
    node = fixed_labels(labels)
    return any(
        all(e["operator"] in ("In", "NotIn", "Exists", "DoesNotExist") for e in expressions)
        and _matches({"matchExpressions": expressions}, node)
        for expressions in (t.get("matchExpressions", []) for t in terms)
    )


def _node_ok(pod: Mapping[str, Any], group: NodeGroup) -> str | None:
    """Why no node of `group` passes the pod's NodeAffinity and TaintToleration filters."""
    selector = pod.get("nodeSelector") or {}
    wrong = {k: v for k, v in selector.items() if group.labels.get(k) != v}
    if wrong:
        return f"nodeSelector {wrong} not among its labels"
    required = (
        pod.get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms")
    )
    if required and not _terms_match(required, group.labels):
        return "required nodeAffinity not met"
    for taint in group.taints:
        if taint["effect"] in ("NoSchedule", "NoExecute") and not _tolerated(pod, taint):
            return f"taint {taint['key']}={taint['value']}:{taint['effect']} not tolerated"
    return None


def unbound_claims(objects: Sequence[Manifest], world: World | None = None) -> list[str]:
    """Every claim a pod uses that binds no PersistentVolume or StorageClass the stack creates.

    A claim pre-bound to a volume (the volume's `claimRef`, or the claim's `volumeName`) binds
    only if the volume is large enough, of the same class and volume mode, and offers every
    access mode asked (kubernetes v1.35 pkg/controller/volume/persistentvolume/pv_controller.go
    `checkVolumeSatisfyClaim`); the pod then schedules only on a node the volume's nodeAffinity
    admits (staging/src/k8s.io/component-helpers/storage/volume/pv_helpers.go
    `CheckNodeAffinity`, from pkg/scheduler/framework/plugins/volumebinding/binder.go): here a
    node of a group the pod selects. A claim no volume is bound to is provisioned by its class,
    which must exist. A pod naming a claim that is not created stays Pending.
    """
    created = [*objects, *(world.created if world else ())]
    groups = world.node_groups if world else ()
    classes = {o["metadata"]["name"] for o in created if o["kind"] == "StorageClass"}
    volumes = [o for o in created if o["kind"] == "PersistentVolume"]
    claims = {
        (o["metadata"].get("namespace", "default"), o["metadata"]["name"]): o["spec"]
        for o in created
        if o["kind"] == "PersistentVolumeClaim"
    }
    templates = {}
    for obj in objects:
        if obj["kind"] == "LeaderWorkerSet":
            for claim in obj["spec"]["leaderWorkerTemplate"].get("volumeClaimTemplates", []):
                templates[obj["metadata"]["name"], claim["metadata"]["name"]] = claim["spec"]
    found = []
    for pod in pods(objects):
        used = [
            v["persistentVolumeClaim"]["claimName"]
            for v in pod.spec.get("volumes", [])
            if "persistentVolumeClaim" in v
        ]
        owner = pod.where.split()[0].split("/")[-1]
        for name in [*used, *pod.claims]:
            spec = claims.get((pod.namespace, name))
            if spec is None and name in pod.claims:
                # The StatefulSet creates what is not there, from its template.
                spec = next(
                    s
                    for (lws, t), s in templates.items()
                    if lws == owner and name.startswith(f"{t}-")
                )
            if spec is None:
                found.append(f"{pod.where} claim {name} is not created")
                continue
            fault = _binds(pod, name, spec, volumes, classes, groups)
            if fault:
                found.append(f"{pod.where} claim {name}: {fault}")
    return list(dict.fromkeys(found))


def _binds(
    pod: Pod,
    name: str,
    claim: Mapping[str, Any],
    volumes: Sequence[Manifest],
    classes: set[str],
    groups: Sequence[NodeGroup],
) -> str | None:
    def bound_to(volume: Manifest) -> bool:
        ref = volume["spec"].get("claimRef") or {}
        mine = ref.get("name") == name and ref.get("namespace") == pod.namespace
        return mine or volume["metadata"]["name"] == claim.get("volumeName")

    bound = [v for v in volumes if bound_to(v)]
    wanted_class = claim.get("storageClassName") or ""
    if not bound:
        if wanted_class not in classes:
            return f"no volume is bound to it and its class {wanted_class!r} is not created"
        return None
    volume = bound[0]["spec"]
    asked = quantity(claim["resources"]["requests"]["storage"])
    if quantity(volume["capacity"]["storage"]) < asked:
        return f"volume {bound[0]['metadata']['name']} is smaller than the claim"
    if (volume.get("storageClassName") or "") != wanted_class:
        return f"volume class {volume.get('storageClassName')!r} is not {wanted_class!r}"
    if volume.get("volumeMode", "Filesystem") != claim.get("volumeMode", "Filesystem"):
        return "volume mode differs"
    if not set(claim.get("accessModes", [])) <= set(volume.get("accessModes", [])):
        return f"volume access modes {volume.get('accessModes')} lack {claim.get('accessModes')}"
    terms = volume.get("nodeAffinity", {}).get("required", {}).get("nodeSelectorTerms")
    if terms and groups:
        reachable = [g for g in groups if _node_ok(pod.spec, g) is None]
        if not any(_terms_match(terms, g.labels) for g in reachable):
            zones = sorted({g.labels.get(ZONE_LABEL, "?") for g in reachable})
            return f"volume's nodeAffinity admits no node of its pods' groups (zones {zones})"
    return None


# -- rule: every pod fits a node group ---------------------------------------------------------


def pod_requests(pod: Mapping[str, Any]) -> tuple[float, float]:
    """(cores, bytes) the scheduler counts for a pod: the containers' requests summed with the
    sidecars', against each init container's with the sidecars started before it, whichever is
    larger, plus the pod's overhead (kubernetes v1.35 staging/src/k8s.io/component-helpers/
    resource/helpers.go `PodRequests`, used by pkg/scheduler/framework/plugins/noderesources/
    fit.go `computePodResourceRequest`)."""

    def req(container: Mapping[str, Any]) -> tuple[float, float]:
        r = container.get("resources", {}).get("requests") or {}
        return quantity(r.get("cpu", 0)), quantity(r.get("memory", 0))

    cpu = sum(req(c)[0] for c in pod.get("containers", []))
    mem = sum(req(c)[1] for c in pod.get("containers", []))
    side_cpu = side_mem = init_cpu = init_mem = 0.0
    for container in pod.get("initContainers", []):
        c, m = req(container)
        if container.get("restartPolicy") == "Always":
            side_cpu, side_mem = side_cpu + c, side_mem + m
            init_cpu, init_mem = max(init_cpu, side_cpu), max(init_mem, side_mem)
        else:
            init_cpu, init_mem = max(init_cpu, c + side_cpu), max(init_mem, m + side_mem)
    overhead = pod.get("overhead") or {}
    cpu = max(cpu + side_cpu, init_cpu) + quantity(overhead.get("cpu", 0))
    mem = max(mem + side_mem, init_mem) + quantity(overhead.get("memory", 0))
    return cpu, mem


def unschedulable(objects: Sequence[Manifest], world: World) -> list[str]:
    """Every pod template (Jobs included) that fits no node group the stack creates.

    The scheduler filters nodes by the pod's nodeSelector and required node affinity
    (kubernetes v1.35 pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go `Filter`),
    by its tolerations of the node's NoSchedule and NoExecute taints
    (pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go `Filter`) and by its
    requests against what is left of the node's allocatable (pkg/scheduler/framework/plugins/
    noderesources/fit.go `fitsRequest`); the Cluster Autoscaler adds a node only where the same
    filters pass on the group's template node. A pod no group passes stays Pending for ever.
    """
    found = []
    for pod in pods(objects):
        why = []
        cpu, mem = pod_requests(pod.spec)
        for group in world.node_groups:
            reason = _node_ok(pod.spec, group)
            if reason is None and cpu * 1000 > group.millicpu:
                reason = f"requests {cpu * 1000:.0f}m CPU, {group.millicpu}m left per node"
            if reason is None and mem / 2**20 > group.memory_mib:
                reason = f"requests {mem / 2**20:.0f} MiB, {group.memory_mib:.0f} MiB left per node"
            if reason is None:
                break
            why.append(f"{group.name}: {reason}")
        else:
            found.append(f"{pod.where} fits no node group ({'; '.join(why) or 'none created'})")
    return found


# -- rule: PodDisruptionBudgets ----------------------------------------------------------------


def _replicas(objects: Sequence[Manifest]) -> dict[str, int]:
    """Pod template (`Pod.where`) -> how many pods it runs, for the kinds whose count is theirs:
    a Deployment's or StatefulSet's `replicas`, 1 when unset (the API server's default,
    kubernetes v1.35 pkg/apis/apps/v1/defaults.go)."""
    return {
        f"{o['kind']}/{o['metadata']['name']}": int(o["spec"].get("replicas", 1))
        for o in objects
        if o["kind"] in ("Deployment", "StatefulSet")
    }


def stuck_budgets(objects: Sequence[Manifest]) -> list[str]:
    """Every PodDisruptionBudget that selects no rendered pod, shares a pod with another budget,
    or, by `minAvailable`, allows no eviction even while every pod it selects is Ready.

    The eviction API takes the budgets whose selector matches the pod in its namespace
    (kubernetes v1.35 pkg/registry/core/pod/storage/eviction.go `getPodDisruptionBudgets`); with
    more than one it refuses every eviction of the pod ("This pod has more than one
    PodDisruptionBudget", 500), so a drain of its node never ends. An eviction of a Ready pod
    needs `disruptionsAllowed` above 0 (`checkAndDecrement`), which the disruption controller
    sets to currentHealthy - desiredHealthy, desiredHealthy being an integer `minAvailable`
    (pkg/controller/disruption/disruption.go `getExpectedPodCount`, `updatePdbStatus`): a
    `minAvailable` at or above the pods its Deployments and StatefulSets run allows none, ever.
    A budget matching nothing guards nothing, most often a mistyped selector.
    """
    all_pods = pods(objects)
    counts = _replicas(objects)
    found = []
    guarded: dict[str, list[str]] = {}
    for pdb in (o for o in objects if o["kind"] == "PodDisruptionBudget"):
        name = f"PodDisruptionBudget/{pdb['metadata']['name']}"
        ns = pdb["metadata"].get("namespace", "default")
        selector = pdb["spec"].get("selector") or {}
        # An empty selector matches no pod here (eviction.go: "it should match nothing").
        chosen = _selected(selector, ns, all_pods) if selector else []
        if not chosen:
            found.append(f"{name} selector {selector} matches no pod")
            continue
        for pod in chosen:
            guarded.setdefault(pod.where, []).append(name)
        minimum = pdb["spec"].get("minAvailable")
        if isinstance(minimum, int) and all(pod.where in counts for pod in chosen):
            total = sum(counts[pod.where] for pod in chosen)
            if minimum >= total:
                found.append(
                    f"{name} minAvailable {minimum} of the {total} pod(s) it selects allows no "
                    f"eviction: a drain of their nodes never ends; run more replicas or lower it"
                )
    found += [
        f"{where} is selected by {len(names)} PodDisruptionBudgets ({', '.join(names)}): the "
        f"eviction API refuses every eviction of it"
        for where, names in guarded.items()
        if len(names) > 1
    ]
    return found


def check(objects: Sequence[Manifest], world: World) -> list[str]:
    """Every rule above, in order, over the rendered objects and the program's own (whose pods,
    the metrics collector's, must run too)."""
    every = [*objects, *world.created]
    return [
        *unresolved_ports(every),
        *unserved_services(every, world),
        *loose_network_policies(every, world),
        *missing_references(every, world),
        *unbound_claims(every, world),
        *unschedulable(every, world),
        *stuck_budgets(every),
        *untargeted_load_balancers(every, world),
    ]
