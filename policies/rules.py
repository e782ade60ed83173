"""The project's deployment policies as pure functions, shared by the policy pack and the tests.

Each validator takes `(resource_type, props)` - a Pulumi type token and the resource's inputs in
camelCase Kubernetes shape, as pulumi-kubernetes registers them - and returns its violation
messages (an empty list means the resource passes). Nothing here imports `pulumi_policy`:
`__main__.py` wraps each `Rule` in a `ResourceValidationPolicy`, and tests feed the same functions
plain dicts or the inputs the program registers under Pulumi mocks.

The validators read `props` only through the `Mapping` / `Sequence` interfaces, because inside the
policy pack `args.props` is a proxy (`pulumi_policy.proxy._DictProxy`, `_ListProxy`, which are not
`dict`/`list`) that raises `UnknownValueError` when a value is unknown during preview;
pulumi-policy turns that into an advisory "can't run policy ... during preview" note.

How a policy sees secrets (pulumi 3.272.0 engine, pulumi-policy 1.21.0):

- Resource inputs: the engine marshals them for `Analyze` with `KeepSecrets: true`
  (pulumi/pulumi `sdk/go/common/resource/plugin/analyzer_plugin.go`, `analyzer.Analyze`), so a
  secret arrives as the wire wrapper `{"4dabf18193072939515e22adb298388d":
  "1b47061264138c4ac30d75fd1eb44270", "value": ...}`. pulumi-policy's `Analyze` then calls
  `deserialize_properties(...)` without `proxy_secrets` (`pulumi_policy/policy.py`), and
  `_deserialize_property` returns the bare `value` (`pulumi_policy/deserialize.py`). So
  `args.props` holds the PLAINTEXT with no trace of its secretness; only `Remediate` wraps secrets
  in `pulumi_policy.Secret`. Pulumi documents this ("secrets are unencrypted in policy-pack
  checks", CrossGuard FAQ; pulumi/pulumi-policy#163) and has no way for a policy to ask whether a
  value is secret (pulumi/pulumi-policy#241, open). `tests/test_policies.py` runs pulumi-policy's
  own `Analyze` on a wrapped value to pin this down.
- Under Pulumi mocks (`pulumi.runtime.mocks.MockMonitor.RegisterResource`), by contrast, the
  recorded inputs keep the wrapper dict, so `is_pulumi_secret` recognises it there.
- Stack config: the engine hands the pack the decrypted config in `PULUMI_CONFIG`, but not which
  keys are secret (`constructConfig` drops the secret-key list: `config, _ :=
  PropertyMapToConfig(opts.Config)`). A policy pack therefore cannot tell `pulumi config set
  --secret hfToken` from a plain one; the program refuses plain secrets itself
  (`infra.plan.config`).

Consequence for `secrets-not-in-plain-config`: in a real preview, a Hugging Face token that was
correctly set with `--secret` reaches the policy as plain text too. The program asserts where a
Secret's values come from with the label `gemma-graviton.dev/secret-source`: `pulumi-secret`
(built from `--secret` config; accepted) or `plain` (every value is a violation). An unlabelled
Secret fails if a value looks like a Hugging Face token.

The endpoint's rules check the objects themselves, not a label the program sets: the Service's
target port and TLS listener, the gatekeeper container and vLLM's loopback address.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import ipaddress
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
POD = "kubernetes:core/v1:Pod"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
STATEFULSET = "kubernetes:apps/v1:StatefulSet"
JOB = "kubernetes:batch/v1:Job"
SERVICE = "kubernetes:core/v1:Service"
SECRET = "kubernetes:core/v1:Secret"

#: Workloads whose pod template sits at `spec.template`.
TEMPLATED_WORKLOADS = (DEPLOYMENT, DAEMONSET, STATEFULSET, JOB)

LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
#: LWS annotations that pack a group (or subgroup) into ONE topology domain.
EXCLUSIVE_TOPOLOGY_ANNOTATIONS = (
    "leaderworkerset.sigs.k8s.io/exclusive-topology",
    "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology",
)
HOSTNAME_TOPOLOGY_KEY = "kubernetes.io/hostname"

SECRET_SOURCE_LABEL = "gemma-graviton.dev/secret-source"

#: The engine's wire encoding of a secret value (pulumi `sdk/go/common/resource/properties.go`).
SPECIAL_SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"

Validator = Callable[[str, Mapping[str, Any]], list[str]]


@dataclass(frozen=True)
class Rule:
    """One policy: what the pack registers, and the pure function that decides it."""

    name: str
    """The policy name, unique in the pack (kebab-case, as Pulumi shows it)."""
    description: str
    """One sentence: what the policy requires and why."""
    enforcement_level: Literal["advisory", "mandatory", "disabled"]
    """What a violation does: `mandatory` fails the preview or update."""
    validate: Validator
    """`(resource_type, props) -> messages`; an empty list means the resource passes."""


# -- Kubernetes quantities ---------------------------------------------------------------------

_QUANTITY = re.compile(
    r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?"
)
_SUFFIX = {
    None: Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
# Far beyond any resource amount; keeps `1e999999999` from building a huge integer.
_MAX_EXPONENT = 40


def parse_quantity(value: object) -> Fraction:
    """The exact value of a Kubernetes quantity (`26Gi`, `27917287424`, `6`, `6000m`, `1.5e3`).

    Numbers are accepted too, because Pulumi passes a number input as a float. Raises
    `ValueError` for anything Kubernetes would not parse as a quantity.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a Kubernetes quantity")
        # repr is the shortest decimal that round-trips, which is what the JSON number said.
        return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    match = _QUANTITY.fullmatch(value)
    if match is None:
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    number, suffix, exponent = match.groups()
    if exponent is not None:
        if abs(int(exponent)) > _MAX_EXPONENT:
            raise ValueError(f"{value!r} is out of range for a Kubernetes quantity")
        return Fraction(number) * Fraction(10) ** int(exponent)
    return Fraction(number) * _SUFFIX[suffix]


# -- reading props -----------------------------------------------------------------------------


def is_pulumi_secret(value: object) -> bool:
    """True if `value` is the engine's secret wrapper (as Pulumi mocks record secret inputs)."""
    return (
        isinstance(value, Mapping)
        and SPECIAL_SIG_KEY in value
        and value[SPECIAL_SIG_KEY] == SECRET_SIG
    )


def _unwrap(value: object) -> object:
    while is_pulumi_secret(value):
        value = value["value"]  # type: ignore[index]
    return value


def _map(value: object) -> Mapping[str, Any]:
    value = _unwrap(value)
    return value if isinstance(value, Mapping) else {}


def _seq(value: object) -> Sequence[Any]:
    value = _unwrap(value)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return value
    return ()


def _path(props: Mapping[str, Any], *keys: str) -> Mapping[str, Any]:
    current = props
    for key in keys:
        current = _map(current.get(key))
    return current


def _lws_templates(props: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The LWS pod templates that are set: (`leaderTemplate` | `workerTemplate`, template)."""
    lwt = _path(props, "spec", "leaderWorkerTemplate")
    return [(key, _map(lwt.get(key))) for key in ("leaderTemplate", "workerTemplate") if key in lwt]


def _pod_specs(resource_type: str, props: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(prefix for messages, pod spec) of every pod a resource of this type describes."""
    if resource_type == LWS:
        return [
            (f"{name} ", _map(template.get("spec"))) for name, template in _lws_templates(props)
        ]
    if resource_type == POD:
        return [("", _path(props, "spec"))]
    if resource_type in TEMPLATED_WORKLOADS:
        return [("", _path(props, "spec", "template", "spec"))]
    return []


def _containers(
    prefix: str, pod_spec: Mapping[str, Any]
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(`<prefix>container "name"`, container) for containers, then initContainers."""
    for field, kind in (("containers", "container"), ("initContainers", "initContainer")):
        for index, item in enumerate(_seq(pod_spec.get(field))):
            container = _map(item)
            name = _unwrap(container.get("name"))
            label = f'"{name}"' if isinstance(name, str) and name else f"#{index}"
            yield f"{prefix}{kind} {label}", container


# -- 1. model-pods-requests-equal-limits -------------------------------------------------------


def model_pods_requests_equal_limits(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """Every LWS container and init container requests exactly its memory and cpu limits.

    A model pod must be Guaranteed: it holds the weights and the KV cache on a node whose memory
    is almost fully committed, and under memory pressure the kubelet evicts pods that use more
    than they request first. Quantities compare by value (`26Gi` == `27917287424`).
    """
    if resource_type != LWS:
        return []
    messages = []
    for prefix, pod_spec in _pod_specs(resource_type, props):
        for where, container in _containers(prefix, pod_spec):
            resources = _map(container.get("resources"))
            requests = _map(resources.get("requests"))
            limits = _map(resources.get("limits"))
            for resource in ("memory", "cpu"):
                problem = _request_limit_problem(resource, requests, limits)
                if problem:
                    messages.append(f"{where}: {problem}")
    return messages


def _request_limit_problem(
    resource: str, requests: Mapping[str, Any], limits: Mapping[str, Any]
) -> str | None:
    request, limit = _unwrap(requests.get(resource)), _unwrap(limits.get(resource))
    if request is None and limit is None:
        return (
            f"{resource} has no request and no limit; set resources.requests.{resource} and "
            f"resources.limits.{resource} to the same quantity"
        )
    if request is None:
        return f"{resource} has no request; set resources.requests.{resource} to the limit {limit}"
    if limit is None:
        return f"{resource} has no limit; set resources.limits.{resource} to the request {request}"
    for kind, quantity in (("request", request), ("limit", limit)):
        try:
            parse_quantity(quantity)
        except ValueError:
            return f'{resource} {kind} "{quantity}" is not a Kubernetes quantity'
    if parse_quantity(request) != parse_quantity(limit):
        return (
            f"{resource} request {request} differs from limit {limit}; set the request equal to "
            "the limit so the pod is Guaranteed"
        )
    return None


# -- 2. ranks-spread-by-required-anti-affinity -------------------------------------------------

# A label whose value exists on the pod but cannot be known from the template (group-key).
_SOME_VALUE = object()


def ranks_spread_by_required_anti_affinity(
    resource_type: str, props: Mapping[str, Any]
) -> list[str]:
    """No two ranks of an LWS group share a node: both templates require hostname anti-affinity.

    A pipeline stage is sized to a whole node, so two ranks on one node cannot both fit. The
    required term must select every pod of the group (the leader and the workers), by the LWS
    name or group key. The `exclusive-topology` annotations do the opposite: they pack a group
    into one topology domain.
    """
    if resource_type != LWS:
        return []
    metadata = _map(props.get("metadata"))
    annotations = _map(metadata.get("annotations"))
    messages = [
        f'metadata.annotations["{key}"] packs each group into one {_unwrap(annotations[key])} '
        "domain, the opposite of spreading ranks over nodes; remove it"
        for key in EXCLUSIVE_TOPOLOGY_ANNOTATIONS
        if key in annotations
    ]
    templates = dict(_lws_templates(props))
    group_pods = _group_pod_labels(metadata, templates)
    namespace = _unwrap(metadata.get("namespace"))
    for name in ("leaderTemplate", "workerTemplate"):
        if name == "leaderTemplate" and name not in templates:
            continue  # the leader uses the worker template
        terms = _seq(
            _path(templates.get(name, {}), "spec", "affinity", "podAntiAffinity").get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
        )
        if not any(_spreads_group(_map(term), group_pods, namespace) for term in terms):
            messages.append(
                f"{name}: no podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution term "
                f"with topologyKey {HOSTNAME_TOPOLOGY_KEY} selects every pod of the group; add one "
                f"whose labelSelector requires {LWS_NAME_LABEL} In [<metadata.name>] (or with "
                f"matchLabelKeys [{LWS_GROUP_KEY_LABEL}]) so that no two ranks share a node"
            )
    return messages


def _group_pod_labels(
    metadata: Mapping[str, Any], templates: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, object]]:
    """The labels of the group's leader and of a worker, as far as the LWS spec determines them."""
    lws_name = _unwrap(metadata.get("name"))
    injected: dict[str, object] = {
        LWS_NAME_LABEL: lws_name if isinstance(lws_name, str) and lws_name else _SOME_VALUE,
        LWS_GROUP_KEY_LABEL: _SOME_VALUE,
    }
    worker = templates.get("workerTemplate", {})
    leader = templates.get("leaderTemplate", worker)
    pods = []
    for template, worker_index in ((leader, "0"), (worker, _SOME_VALUE)):
        labels: dict[str, object] = {
            str(k): _unwrap(v) for k, v in _path(template, "metadata", "labels").items()
        }
        pods.append({**labels, **injected, LWS_WORKER_INDEX_LABEL: worker_index})
    return pods


def _spreads_group(
    term: Mapping[str, Any], group_pods: list[dict[str, object]], namespace: object
) -> bool:
    """True if `term` provably keeps every pod of the group off each other's nodes."""
    if _unwrap(term.get("topologyKey")) != HOSTNAME_TOPOLOGY_KEY:
        return False
    if not _term_covers_namespace(term, namespace):
        return False
    selector = _unwrap(term.get("labelSelector"))
    if not isinstance(selector, Mapping):
        return False  # a term without a selector matches no pods
    requirements = [
        (str(key), "In", [_unwrap(value)])
        for key, value in _map(selector.get("matchLabels")).items()
    ]
    for expression in _seq(selector.get("matchExpressions")):
        expression = _map(expression)
        values = [_unwrap(v) for v in _seq(expression.get("values"))]
        requirements.append(
            (str(_unwrap(expression.get("key"))), str(_unwrap(expression.get("operator"))), values)
        )
    same_keys = [str(_unwrap(k)) for k in _seq(term.get("matchLabelKeys"))]
    other_keys = [str(_unwrap(k)) for k in _seq(term.get("mismatchLabelKeys"))]
    group_keys = {LWS_NAME_LABEL, LWS_GROUP_KEY_LABEL}
    names_group = any(
        key in group_keys and op in ("In", "Exists") for key, op, _ in requirements
    ) or any(key in group_keys for key in same_keys)
    return (
        names_group
        and all(_satisfied(req, pod) for req in requirements for pod in group_pods)
        and all(_shared_by_group(key, group_pods) for key in same_keys)
        and not any(
            key in group_keys or _shared_by_group(key, group_pods, True) for key in other_keys
        )
    )


def _term_covers_namespace(term: Mapping[str, Any], namespace: object) -> bool:
    """Whether the term looks at the LWS's own namespace (the default when none is named)."""
    if "namespaceSelector" in term:
        selector = _map(term.get("namespaceSelector"))
        # {} selects every namespace; a real selector cannot be checked without the namespaces.
        return not _map(selector.get("matchLabels")) and not _seq(selector.get("matchExpressions"))
    namespaces = [_unwrap(n) for n in _seq(term.get("namespaces"))]
    return not namespaces or namespace in namespaces


def _satisfied(requirement: tuple[str, str, list[object]], labels: Mapping[str, object]) -> bool:
    """Whether the pod's labels provably satisfy one selector requirement."""
    key, operator, values = requirement
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    value = labels.get(key)
    if operator == "In":
        return key in labels and value is not _SOME_VALUE and value in values
    if operator == "NotIn":
        return key not in labels or (value is not _SOME_VALUE and value not in values)
    return False


def _shared_by_group(key: str, group_pods: list[dict[str, object]], present: bool = False) -> bool:
    """Whether every pod of the group has the same value for `key`.

    `matchLabelKeys` adds "key In [own value]"; it is ignored where the pod lacks the key.
    With `present=True`, the key must also exist (what makes `mismatchLabelKeys` exclude the group).
    """
    if key in (LWS_NAME_LABEL, LWS_GROUP_KEY_LABEL):
        return True
    values = [pod.get(key) for pod in group_pods]
    if all(v is None for v in values):
        return not present
    return all(v is not None and v is not _SOME_VALUE and v == values[0] for v in values)


# -- 3. images-pinned --------------------------------------------------------------------------

_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}")


def images_pinned(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """Every container image names a version tag other than `latest`, or an `@sha256` digest.

    A floating image changes what runs on the next pod restart without any change in review.
    """
    messages = []
    for prefix, pod_spec in _pod_specs(resource_type, props):
        for where, container in _containers(prefix, pod_spec):
            problem = _image_problem(_unwrap(container.get("image")))
            if problem:
                messages.append(f"{where}: {problem}")
    return messages


def _image_problem(image: object) -> str | None:
    fix = "pin a version tag or an @sha256 digest"
    if not isinstance(image, str) or not image:
        return f"has no image; set an image and {fix}"
    if "@" in image:
        digest = image[image.index("@") :]
        if _DIGEST.fullmatch(digest):
            return None
        return f'image "{image}" has a malformed digest; use @sha256:<64 hex digits>'
    last = image.rsplit("/", 1)[-1]
    tag = last.rsplit(":", 1)[1] if ":" in last else ""
    if not tag:
        return f'image "{image}" has no tag; {fix}'
    if tag == "latest":
        return f'image "{image}" uses the moving tag latest; {fix}'
    return None


# -- 4. load-balancer-to-gatekeeper-over-tls -------------------------------------------------

GATEKEEPER = "gatekeeper"
SSL_CERT_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-ssl-cert"
SSL_PORTS_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-ssl-ports"
#: What makes the in-tree controller (the cloud provider that EKS runs, which builds this NLB)
#: create an internal load balancer: this annotation with any value but "" and "false"
#: (kubernetes/cloud-provider-aws pkg/providers/v1/aws.go, EnsureLoadBalancer, `internalELB`,
#: commit 63ec440c, read 2026-12-01). `aws-load-balancer-scheme: internal` is the AWS Load Balancer
#: Controller's annotation; the in-tree controller never reads it and builds an internet-facing
#: load balancer whatever it says.
INTERNAL_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-internal"
#: RFC 1918: clients there come through a VPN or a peered network, not the internet.
PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
)


def load_balancer_to_gatekeeper_over_tls(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """A LoadBalancer Service sends traffic only to the gatekeeper's port, and one that the
    internet reaches listens with TLS.

    Every port must target the named port `gatekeeper` (the proxy that checks the key and the
    routes): a numeric or other target exposes a container directly, vLLM's included. The
    listener must be TLS (the `aws-load-balancer-ssl-cert` annotation, with `ssl-ports` covering
    every port) unless the load balancer is internal (`INTERNAL_ANNOTATION`, as the in-tree
    controller reads it; no other annotation counts) or every source range is private (RFC 1918)
    or a single address (/32, a short test from one machine). No `loadBalancerSourceRanges` means
    every address. Ranges set only through the legacy `load-balancer-source-ranges` annotation
    are not read.
    """
    if resource_type != SERVICE:
        return []
    spec = _map(props.get("spec"))
    if _unwrap(spec.get("type")) != "LoadBalancer":
        return []
    messages = []
    ports = [_map(p) for p in _seq(spec.get("ports"))]
    # `frontDoor: vllm-key`: vLLM checks the key itself, on its own port (`VLLM_KEY_PORT`).
    labels = _path(props, "metadata", "labels")
    allowed = VLLM_KEY_PORT if _unwrap(labels.get(FRONT_DOOR_LABEL)) == "vllm-key" else GATEKEEPER
    for index, port in enumerate(ports):
        target = _unwrap(port.get("targetPort"))
        if target != allowed:
            shown = _unwrap(port.get("name")) or f"#{index}"
            messages.append(
                f'spec.ports "{shown}" targets {target!r}, not the gatekeeper\'s port '
                f'"{GATEKEEPER}"; send load-balancer traffic only through the gatekeeper, never '
                "to vLLM directly"
            )
    annotations = _path(props, "metadata", "annotations")
    internal = _unwrap(annotations.get(INTERNAL_ANNOTATION))
    if isinstance(internal, str) and internal not in ("", "false"):
        return messages
    public, malformed = _public_ranges(spec)
    messages += [
        f'spec.loadBalancerSourceRanges entry "{entry}" is not a CIDR; list CIDRs'
        for entry in malformed
    ]
    if not public or all(net.prefixlen == net.max_prefixlen for net in public):
        return messages
    cert = _unwrap(annotations.get(SSL_CERT_ANNOTATION))
    tls_ports = str(_unwrap(annotations.get(SSL_PORTS_ANNOTATION)) or "*").split(",")
    covered = all(
        "*" in tls_ports or str(_unwrap(p.get("name"))) in tls_ports or _port_text(p) in tls_ports
        for p in ports
    )
    if not cert or not covered:
        shown = ", ".join(str(n) for n in public[:3])
        messages.append(
            f"the internet reaches this load balancer ({shown}) over plain HTTP; terminate TLS "
            f"on it ({SSL_CERT_ANNOTATION} with an ACM certificate, {SSL_PORTS_ANNOTATION} "
            "covering every port), or admit only private ranges or single /32 addresses"
        )
    return messages


def _port_text(port: Mapping[str, Any]) -> str:
    number = _unwrap(port.get("port"))
    return str(int(number)) if isinstance(number, int | float) else str(number)


def _public_ranges(
    spec: Mapping[str, Any],
) -> tuple[list[ipaddress.IPv4Network | ipaddress.IPv6Network], list[object]]:
    """The non-private source ranges (no list at all means every address) and malformed ones."""
    entries = [_unwrap(r) for r in _seq(spec.get("loadBalancerSourceRanges"))]
    if not entries:
        return [ipaddress.ip_network("0.0.0.0/0")], []
    public, malformed = [], []
    for entry in entries:
        try:
            network = ipaddress.ip_network(str(entry), strict=False)
        except ValueError:
            malformed.append(entry)
            continue
        private = network.version == 4 and any(
            network.subnet_of(p)  # type: ignore[arg-type]
            for p in PRIVATE_NETWORKS
        )
        if not private:
            public.append(network)
    return public, malformed


# -- 4a. load-balancer-names-scheme-and-targets ------------------------------------------------

#: "k=v,k=v": the nodes the load balancer targets (both controllers read it; without it every
#: node of the cluster is a target: cloud-provider-aws v1.35.2 pkg/providers/v1/aws_loadbalancer.go
#: `filterTargetNodes`; aws-load-balancer-controller v2.17.1
#: pkg/service/model_build_target_group.go `buildTargetGroupBindingNodeSelector`).
TARGET_NODES_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-target-node-labels"
#: What the in-tree provider refuses on an NLB before it makes anything (cloud-provider-aws
#: v1.35.2 pkg/providers/v1/aws_validations.go `validateServiceAnnotations`; in v1.32.6, v1.33.3,
#: v1.34.0 and later): a bring-your-own security group, a target-group attribute but the two it
#: manages or a value of theirs but true or false, the target-group attributes on anything but
#: an NLB. The Service then never gets a load balancer, and `pulumi up` waits for its hostname
#: in vain.
NLB_TYPE_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-type"
NLB_REFUSED_ANNOTATIONS = (
    "service.beta.kubernetes.io/aws-load-balancer-security-groups",
    "service.beta.kubernetes.io/aws-load-balancer-extra-security-groups",
)
TARGET_GROUP_ATTRIBUTES_ANNOTATION = (
    "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"
)
NLB_TARGET_GROUP_ATTRIBUTES = ("preserve_client_ip.enabled", "proxy_protocol_v2.enabled")


def load_balancer_names_scheme_and_targets(
    resource_type: str, props: Mapping[str, Any]
) -> list[str]:
    """A LoadBalancer Service says its scheme, `INTERNAL_ANNOTATION` "true" or "false": without
    it the in-tree controller builds an internet-facing load balancer and the AWS Load Balancer
    Controller, if its webhook takes the Service, an internal one (v2.17.1
    pkg/config/controller_config.go `DefaultLoadBalancerScheme`). It also names its target nodes
    by label; that the label is on the nodes of the pods it selects is checked over a stack's
    objects (`components.manifests.semantics.untargeted_load_balancers`). An NLB names no
    annotation the in-tree provider refuses (`NLB_REFUSED_ANNOTATIONS`,
    `NLB_TARGET_GROUP_ATTRIBUTES`)."""
    if resource_type != SERVICE or _unwrap(_map(props.get("spec")).get("type")) != "LoadBalancer":
        return []
    annotations = _path(props, "metadata", "annotations")
    messages = []
    if _unwrap(annotations.get(INTERNAL_ANNOTATION)) not in ("true", "false"):
        messages.append(
            f'{INTERNAL_ANNOTATION} is not "true" or "false": the scheme is the controller\'s '
            "default, internal under the AWS Load Balancer Controller; set it"
        )
    if not str(_unwrap(annotations.get(TARGET_NODES_ANNOTATION)) or "").strip(", "):
        messages.append(
            f"no {TARGET_NODES_ANNOTATION}: every node of the cluster is a target and opens its "
            "security group; name the label of the pool whose nodes run the selected pods"
        )
    kind = _unwrap(annotations.get(NLB_TYPE_ANNOTATION))
    if kind in ("external", "nlb-ip"):  # another controller's (aws_loadbalancer.go isLBExternal)
        return messages
    if kind == "nlb":
        messages += [
            f"{key}: the cloud provider refuses it on an NLB and makes no load balancer; drop it"
            for key in NLB_REFUSED_ANNOTATIONS
            if key in annotations
        ]
    if TARGET_GROUP_ATTRIBUTES_ANNOTATION not in annotations:
        return messages
    if kind != "nlb":
        return [
            *messages,
            f"{TARGET_GROUP_ATTRIBUTES_ANNOTATION}: the cloud provider takes it on an NLB only",
        ]
    for pair in str(_unwrap(annotations[TARGET_GROUP_ATTRIBUTES_ANNOTATION]) or "").split(","):
        key, _, value = (part.strip() for part in pair.partition("="))
        if key not in NLB_TARGET_GROUP_ATTRIBUTES:
            messages.append(
                f"{TARGET_GROUP_ATTRIBUTES_ANNOTATION} names {key}: the cloud provider sets only "
                f"{' and '.join(NLB_TARGET_GROUP_ATTRIBUTES)} and makes no load balancer; set it "
                "on the target group instead (components/balancer.py)"
            )
        elif value not in ("true", "false"):
            messages.append(
                f"{TARGET_GROUP_ATTRIBUTES_ANNOTATION} {key}={value}: the cloud provider takes "
                "true or false only and makes no load balancer"
            )
    return messages


# -- 4b. leaders-behind-gatekeeper -------------------------------------------------------------

#: The label on an elastic stack's group pods, whose gatekeeper is the door apart from them.
BEHIND_DOOR_LABEL = "gemma-graviton.dev/behind-door"
#: On the endpoint Service and the leaders with `frontDoor: vllm-key` (no gatekeeper).
FRONT_DOOR_LABEL = "gemma-graviton.dev/front-door"
#: vLLM's port, which the load balancer targets with `frontDoor: vllm-key`.
VLLM_KEY_PORT = 8000


#: vLLM 0.31 checks its key under /v1, /v2, /inference and /cohere only
#: (serve/middleware/authenticate.py); the leader's middleware asks for it on every other route
#: (components/manifests/programs/key_check.py, imported from a mounted PYTHONPATH).
KEY_CHECK_MIDDLEWARE = "key_check.KeyCheck"
#: Settings that serve the API without that middleware or put code in front of it (vLLM 0.31):
#: the Rust front end (envs.py `VLLM_USE_RUST_FRONTEND`, entrypoints/cli/serve.py), the dev
#: routes (`VLLM_SERVER_DEV_MODE`, serve/routers.py), and SageMaker's middlewares
#: (model_hosting_container_standards common/fastapi/config.py `CUSTOM_FASTAPI_MIDDLEWARE_*`).
KEY_CHECK_BYPASSES = (
    "VLLM_USE_RUST_FRONTEND",
    "VLLM_SERVER_DEV_MODE",
    "CUSTOM_FASTAPI_MIDDLEWARE_",
)


def _vllm_checks_key(name: str, engine: Mapping[str, Any]) -> list[str]:
    """vLLM takes its key from a Secret (VLLM_API_KEY), never from its argv (`--api-key`),
    asks for it on every route through the key-check middleware, mounted on its PYTHONPATH,
    with nothing that serves around it, and declares no port."""
    messages = []
    argv = [str(_unwrap(a)) for a in (*_seq(engine.get("command")), *_seq(engine.get("args")))]
    if any(a.startswith("--api-key") for a in argv):
        messages.append(
            f'{name}: container "vllm" has --api-key in its argv; read the key from '
            "a Secret as VLLM_API_KEY"
        )
    env = {_unwrap(_map(e).get("name")): _map(e) for e in _seq(engine.get("env"))}
    if "secretKeyRef" not in _map(_map(env.get("VLLM_API_KEY")).get("valueFrom")):
        messages.append(
            f'{name}: container "vllm" takes no VLLM_API_KEY from a Secret; with '
            "no gatekeeper in the pod, vLLM must check the key"
        )
    mounts = {_unwrap(_map(m).get("mountPath")) for m in _seq(engine.get("volumeMounts"))}
    path = str(_unwrap(_map(env.get("PYTHONPATH")).get("value")) or "").split(":")
    pairs = {tuple(argv[i : i + 2]) for i in range(len(argv))}
    if ("--middleware", KEY_CHECK_MIDDLEWARE) not in pairs or not mounts & set(path):
        messages.append(
            f'{name}: container "vllm" does not run --middleware {KEY_CHECK_MIDDLEWARE} from a '
            "mounted PYTHONPATH; without it vLLM asks for the key under /v1 only and serves "
            "POST /invocations to anyone"
        )
    bypasses = sorted(n for n in env if str(n).startswith(KEY_CHECK_BYPASSES))
    # A gRPC server in place of the HTTP one: no middleware, no key (vLLM 0.31
    # entrypoints/launchers/grpc_server.py).
    bypasses += [a for a in argv if a.partition("=")[0] == "--grpc"]
    if bypasses:
        messages.append(
            f'{name}: container "vllm" sets {", ".join(bypasses)}, which serve routes around the '
            "key check; remove them"
        )
    if _seq(engine.get("ports")):
        messages.append(f'{name}: container "vllm" declares ports; remove them')
    return messages


def leaders_behind_gatekeeper(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """The pod that serves the API (the LWS leader, or the single template) runs the gatekeeper
    with a port named `gatekeeper`, and vLLM listens on loopback only (`--host=127.0.0.1`) with
    no container port, so nothing but the gatekeeper can reach it."""
    if resource_type != LWS:
        return []
    templates = dict(_lws_templates(props))
    name = "leaderTemplate" if "leaderTemplate" in templates else "workerTemplate"
    containers = {
        _unwrap(c.get("name")): c
        for _, c in _containers("", _map(templates.get(name, {}).get("spec")))
    }
    messages = []
    door = containers.get(GATEKEEPER)
    door_ports = [_unwrap(_map(p).get("name")) for p in _seq((door or {}).get("ports"))]
    labels = _map(_map(templates.get(name, {}).get("metadata")).get("labels"))
    if door is None and (
        _unwrap(labels.get(FRONT_DOOR_LABEL)) == "vllm-key"
        or _unwrap(labels.get(BEHIND_DOOR_LABEL)) == "true"
    ):
        # vLLM on the pod network, with no gatekeeper in the pod (`frontDoor: vllm-key`, or an
        # elastic stack's group behind the door Deployment, components/manifests/door.py): it
        # checks the key itself on every route, read from a Secret, never argv.
        return _vllm_checks_key(name, containers.get("vllm") or {})
    if door is None or GATEKEEPER not in door_ports:
        messages.append(
            f'{name}: no container "{GATEKEEPER}" with a port named "{GATEKEEPER}"; run the '
            "gatekeeper beside vLLM so only the API, with the key, reaches it"
        )
    engine = containers.get("vllm")
    if engine is not None:
        argv = [str(_unwrap(a)) for a in (*_seq(engine.get("command")), *_seq(engine.get("args")))]
        if "--host=127.0.0.1" not in argv:
            messages.append(
                f'{name}: container "vllm" does not listen on loopback; pass --host=127.0.0.1 '
                "so only the gatekeeper in the pod reaches it"
            )
        if _seq(engine.get("ports")):
            messages.append(
                f'{name}: container "vllm" declares ports; remove them, the gatekeeper\'s port '
                "is the pod's only way in"
            )
    return messages


# -- 5. secrets-not-in-plain-config ------------------------------------------------------------

_HF_TOKEN = re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{20,}")


def secrets_not_in_plain_config(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """A Kubernetes Secret carries no value taken from plain (unencrypted) configuration.

    Violations: every `data`/`stringData` entry of a Secret labelled
    `gemma-graviton.dev/secret-source: plain`; and, unless the Secret is labelled
    `gemma-graviton.dev/secret-source: pulumi-secret`, every entry that holds something shaped
    like a Hugging Face token (`hf_` and 20 or more letters or digits; `data` is base64-decoded
    first) and is not a Pulumi secret wrapper. See the module docstring for why the label is
    needed: a policy sees secret values in plain text. Messages never repeat the value.
    """
    if resource_type != SECRET:
        return []
    source = _unwrap(_path(props, "metadata", "labels").get(SECRET_SOURCE_LABEL))
    messages = []
    for field in ("data", "stringData"):
        raw = props.get(field)
        for key, value in _map(raw).items():
            where = f'{field}["{key}"]'
            if source == "plain":
                messages.append(
                    f"{where} comes from plain configuration ({SECRET_SOURCE_LABEL}: plain); set "
                    "it with `pulumi config set --secret` and label the Secret "
                    f"{SECRET_SOURCE_LABEL}: pulumi-secret"
                )
            elif source == "pulumi-secret" or is_pulumi_secret(raw) or is_pulumi_secret(value):
                continue
            elif _holds_hf_token(field, value):
                messages.append(
                    f"{where} holds a Hugging Face token in plain text; set it with `pulumi "
                    "config set --secret hfToken`, pass the secret Output and label the Secret "
                    f"{SECRET_SOURCE_LABEL}: pulumi-secret"
                )
    return messages


def _holds_hf_token(field: str, value: object) -> bool:
    if not isinstance(value, str):
        return False
    texts = [value]
    if field == "data":
        # A value that is not base64 leaves only its raw text to search.
        with contextlib.suppress(binascii.Error, ValueError):
            texts.append(base64.b64decode(value, validate=True).decode("utf-8", "replace"))
    return any(_HF_TOKEN.search(text) for text in texts)


# -- the registry ------------------------------------------------------------------------------

RULES: tuple[Rule, ...] = (
    Rule(
        name="model-pods-requests-equal-limits",
        description=(
            "Every container and init container of a LeaderWorkerSet sets memory and cpu requests "
            "equal to its limits, so model pods are Guaranteed and not evicted first."
        ),
        enforcement_level="mandatory",
        validate=model_pods_requests_equal_limits,
    ),
    Rule(
        name="ranks-spread-by-required-anti-affinity",
        description=(
            "Both LeaderWorkerSet templates require podAntiAffinity on kubernetes.io/hostname "
            "against the group's own pods, and no exclusive-topology annotation packs the group "
            "onto one node."
        ),
        enforcement_level="mandatory",
        validate=ranks_spread_by_required_anti_affinity,
    ),
    Rule(
        name="images-pinned",
        description=(
            "Every container image of a Pod, Deployment, DaemonSet, StatefulSet, Job or "
            "LeaderWorkerSet names a version tag other than latest, or an @sha256 digest."
        ),
        enforcement_level="mandatory",
        validate=images_pinned,
    ),
    Rule(
        name="load-balancer-to-gatekeeper-over-tls",
        description=(
            "A LoadBalancer Service targets only the gatekeeper's port, and one the internet "
            "reaches (beyond private ranges and single /32 addresses) terminates TLS with an "
            "ACM certificate."
        ),
        enforcement_level="mandatory",
        validate=load_balancer_to_gatekeeper_over_tls,
    ),
    Rule(
        name="load-balancer-names-scheme-and-targets",
        description=(
            "A LoadBalancer Service sets aws-load-balancer-internal to true or false and names "
            "its target nodes with aws-load-balancer-target-node-labels; an NLB carries no "
            "annotation the in-tree cloud provider refuses (a security group of its own, a "
            "target-group attribute it does not manage)."
        ),
        enforcement_level="mandatory",
        validate=load_balancer_names_scheme_and_targets,
    ),
    Rule(
        name="leaders-behind-gatekeeper",
        description=(
            "The LeaderWorkerSet's serving pod runs the gatekeeper container, and vLLM listens "
            "on 127.0.0.1 with no container port."
        ),
        enforcement_level="mandatory",
        validate=leaders_behind_gatekeeper,
    ),
    Rule(
        name="secrets-not-in-plain-config",
        description=(
            "A Kubernetes Secret holds no value from plain configuration: none when labelled "
            "gemma-graviton.dev/secret-source: plain, and no Hugging Face token unless labelled "
            "gemma-graviton.dev/secret-source: pulumi-secret."
        ),
        enforcement_level="mandatory",
        validate=secrets_not_in_plain_config,
    ),
)
